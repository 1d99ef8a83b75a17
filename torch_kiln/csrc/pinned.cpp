/* SPDX-License-Identifier: Apache-2.0 */
// pinned.cpp - the host allocator behind Tensor.pin_memory() on kiln. Kiln device memory is host
// memory, so "pinned" host memory needs no driver call: it is ordinary aligned host memory that
// this allocator hands out and remembers, so that is_pinned() (isPinnedPtr) can answer for any
// pointer into a live block.
#include <c10/core/Allocator.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "pinned.h"

namespace torch_kiln {
namespace {

constexpr size_t kPinnedAlignment = 64;

std::mutex g_mu;
std::map<const char*, size_t>& blocks() {  // base -> size of each live pinned block
  static auto* m = new std::map<const char*, size_t>();  // outlives tensors freed at exit
  return *m;
}

void free_pinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    blocks().erase(static_cast<const char*>(ptr));
  }
  std::free(ptr);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nullptr;
    if (nbytes > 0) {
      size_t rounded = (nbytes + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
      TORCH_CHECK(rounded >= nbytes, "kiln: pinned allocation of ", nbytes, " bytes overflows");
      ptr = std::aligned_alloc(kPinnedAlignment, rounded);
      TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "kiln: out of host memory pinning ",
                       nbytes, " bytes");
      std::lock_guard<std::mutex> lock(g_mu);
      blocks()[static_cast<const char*>(ptr)] = nbytes;
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedAllocator g_pinned;

}  // namespace

c10::Allocator* pinned_allocator() { return &g_pinned; }

bool is_pinned_ptr(const void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = blocks().upper_bound(p);
  if (it == blocks().begin()) return false;
  --it;
  return p < it->first + it->second;
}

}  // namespace torch_kiln
