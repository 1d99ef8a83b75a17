/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kiln.h - umbrella header for libkiln. */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/allocator.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/graph.h"
#include "kiln/hal.h"
#include "kiln/model.h"
#include "kiln/parallel.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "kiln/version.h"

#endif /* KILN_KILN_H */
