/* SPDX-License-Identifier: Apache-2.0 */
// kiln_torch.h - shared helpers of the torch_kiln C++ shim: device lookup, status -> exception.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>

extern "C" {
#include "kiln/kiln.h"
}

namespace torch_kiln {

// Number of kiln devices in the process-default registry (0 if it failed to build).
c10::DeviceIndex device_count() noexcept;

// The libkiln device for a torch device index; raises a RuntimeError for an unknown index.
kiln_device_t* device(c10::DeviceIndex index);

// The thread's current kiln device index (what DeviceGuard sets).
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// Converts a failed kiln_status_t into the matching PyTorch exception; no-op on KILN_OK.
// OUT_OF_MEMORY -> torch.OutOfMemoryError, NOT_FOUND/OUT_OF_RANGE -> IndexError (aten's
// TORCH_CHECK_INDEX), UNIMPLEMENTED -> NotImplementedError, else (INVALID_ARGUMENT: a bad shape,
// dtype or value, aten's TORCH_CHECK) RuntimeError.
void check(kiln_status_t status, const char* what);
// As check, but OUT_OF_RANGE is a RuntimeError too: aten's gather/scatter family reports a bad
// index with TORCH_CHECK, not TORCH_CHECK_INDEX.
void check_runtime(kiln_status_t status, const char* what);

// Blocks until all queued work on the device has finished.
void synchronize(c10::DeviceIndex index);

// A CPU tensor aliasing a kiln tensor's memory (kiln memory is host-visible). The caller must
// keep `t` alive while the alias is used and synchronize the device first.
at::Tensor host_alias(const at::Tensor& t);

// Counts `key` in the fallback report (warns the first time; raises NotImplementedError under
// TORCH_KILN_FALLBACK=error). Native kernels call it when they hand a case to the host CPU.
void record_fallback(const std::string& key);

// The boxed CPU fallback (counts the op, then at::native::cpu_fallback). Native kernels route
// cases they do not cover (a dtype kiln lacks, rank > KILN_MAX_DIMS) here with
// at::native::call_fallback_fn<&boxed_fallback, ATEN_OP2(op, overload)>::call(args...).
void boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Default generator for a device (lazily created), and seeding of all generators.
const at::Generator& default_generator(c10::DeviceIndex index);

}  // namespace torch_kiln

#define KILN_CHECK(expr) ::torch_kiln::check((expr), #expr)
#define KILN_CHECK_RT(expr) ::torch_kiln::check_runtime((expr), #expr)
