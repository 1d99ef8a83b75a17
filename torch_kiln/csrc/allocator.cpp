// allocator.cpp - c10::Allocator for kiln devices, backed by kiln_device_alloc (the device's
// caching allocator). One deleter per device index, so DataPtrs carry no heap context.
#include <c10/core/Allocator.h>

#include <array>
#include <cstring>

#include "kiln_torch.h"

namespace torch_kiln {
namespace {

template <int I>
void delete_on_device(void* ptr) {
  kiln_registry_t* reg = nullptr;
  kiln_device_t* dev = nullptr;
  if (kiln_registry_default(&reg) == KILN_OK && kiln_registry_get(reg, I, &dev) == KILN_OK)
    kiln_device_free(dev, ptr);
}

template <int... I>
constexpr std::array<c10::DeleterFnPtr, sizeof...(I)> make_deleters(std::integer_sequence<int, I...>) {
  return {&delete_on_device<I>...};
}

constexpr auto kDeleters = make_deleters(std::make_integer_sequence<int, KILN_MAX_DEVICES>{});

struct KilnAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex index = current_device();
    kiln_device_t* dev = device(index);
    void* ptr = nullptr;
    if (nbytes > 0) {
      // Async work may still be freeing blocks; the device allocator handles limits itself.
      check(kiln_device_alloc(dev, nbytes, &ptr), "alloc");
    }
    return {ptr, ptr, kDeleters[index], c10::Device(c10::DeviceType::PrivateUse1, index)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    kiln_device_t* dev = device(current_device());
    check(kiln_device_copy(dev, nullptr, KILN_COPY_DEVICE_TO_DEVICE, dest, src, count), "copy");
    check(kiln_device_synchronize(dev), "synchronize");
  }
};

KilnAllocator g_allocator;

}  // namespace

c10::Allocator* allocator() { return &g_allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_kiln
