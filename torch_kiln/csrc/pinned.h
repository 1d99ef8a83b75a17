/* SPDX-License-Identifier: Apache-2.0 */
// pinned.h - pinned host memory for kiln (pinned.cpp), used by the PrivateUse1 hooks.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_kiln {

// The allocator Tensor.pin_memory() copies into (CPU tensors; aligned host memory).
c10::Allocator* pinned_allocator();

// True when `ptr` points into a live block from pinned_allocator().
bool is_pinned_ptr(const void* ptr);

}  // namespace torch_kiln
