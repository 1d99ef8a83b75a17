/* SPDX-License-Identifier: Apache-2.0 */
// hooks.cpp - PrivateUse1HooksInterface (availability, generators, device from pointer, pinned
// host memory) and the per-device default generators (KilnGeneratorImpl, generator.h).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>

#include <mutex>
#include <vector>

#include "generator.h"
#include "pinned.h"

namespace torch_kiln {

c10::Allocator* allocator();

namespace {

at::Generator make_generator(c10::DeviceIndex index) {
  auto gen = at::make_generator<KilnGeneratorImpl>(index);
  gen.set_current_seed(c10::detail::getNonDeterministicRandom());
  return gen;
}

struct KilnHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < device_count();
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return make_generator(device_index < 0 ? current_device() : device_index);
  }
  at::Device getDeviceFromPtr(void*) const override {
    // Kiln memory is host memory; with several devices the pointer alone does not say which.
    return c10::Device(c10::DeviceType::PrivateUse1, current_device());
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::DeviceGuard guard(storage.device());
    synchronize(storage.device().index());
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};

KilnHooks g_hooks;

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(&g_hooks); }
} g_register_hooks;

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::once_flag once;
  static std::vector<at::Generator> gens;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); i++) gens.push_back(make_generator(i));
  });
  if (index < 0) index = current_device();
  TORCH_CHECK_INDEX(index >= 0 && index < static_cast<c10::DeviceIndex>(gens.size()),
                    "kiln: device index ", static_cast<int>(index), " out of range: ", gens.size(),
                    " device(s) available");
  return gens[index];
}

}  // namespace torch_kiln
