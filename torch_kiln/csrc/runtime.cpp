/* SPDX-License-Identifier: Apache-2.0 */
// runtime.cpp - process-default registry access, current device and error conversion.
#include "kiln_torch.h"

#include <c10/util/Exception.h>

namespace torch_kiln {

static kiln_registry_t* registry_or_throw() {
  kiln_registry_t* reg = nullptr;
  kiln_status_t s = kiln_registry_default(&reg);
  check(s, "kiln_registry_default");
  return reg;
}

c10::DeviceIndex device_count() noexcept {
  kiln_registry_t* reg = nullptr;
  if (kiln_registry_default(&reg) != KILN_OK) return 0;
  return static_cast<c10::DeviceIndex>(kiln_registry_count(reg));
}

kiln_device_t* device(c10::DeviceIndex index) {
  kiln_registry_t* reg = registry_or_throw();
  if (index < 0) index = current_device();
  kiln_device_t* dev = nullptr;
  check(kiln_registry_get(reg, index, &dev), "kiln device lookup");
  return dev;
}

static thread_local c10::DeviceIndex tls_current_device = 0;

c10::DeviceIndex current_device() { return tls_current_device; }

void set_current_device(c10::DeviceIndex index) {
  device(index);  // validates
  tls_current_device = index;
}

void check(kiln_status_t status, const char* what) {
  if (status == KILN_OK) return;
  std::string msg = std::string("kiln: ") + kiln_status_message();
  (void)what;
  switch (status) {
    case KILN_ERROR_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case KILN_ERROR_NOT_FOUND:
    case KILN_ERROR_OUT_OF_RANGE:
      TORCH_CHECK_INDEX(false, msg);
    case KILN_ERROR_UNIMPLEMENTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    case KILN_ERROR_INVALID_ARGUMENT:
      TORCH_CHECK(false, msg);
    default:
      TORCH_CHECK(false, msg, " (", kiln_status_code_name(status), ")");
  }
}

void check_runtime(kiln_status_t status, const char* what) {
  if (status == KILN_ERROR_OUT_OF_RANGE) TORCH_CHECK(false, "kiln: ", kiln_status_message());
  check(status, what);
}

void synchronize(c10::DeviceIndex index) { check(kiln_device_synchronize(device(index)), "synchronize"); }

at::Tensor host_alias(const at::Tensor& t) {
  if (!t.defined() || t.device().is_cpu()) return t;
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(),
                       t.options().device(c10::kCPU).requires_grad(false));
}

}  // namespace torch_kiln
