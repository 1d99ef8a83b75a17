/* SPDX-License-Identifier: Apache-2.0 */
// allocator.cpp - c10::DeviceAllocator for kiln devices, backed by kiln_device_alloc (the device's
// caching allocator). One deleter per device index, so DataPtrs carry no heap context. The
// statistics torch.accelerator.memory reads come from the device's kiln_memory_stats_t plus a
// per-device count of live allocations kept here.
#include <c10/core/CachingDeviceAllocator.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include "kiln_torch.h"
#include "memory.h"

namespace torch_kiln {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;

constexpr size_t kAll = static_cast<size_t>(StatType::AGGREGATE);

// What the shim adds to the device's statistics: the number of live allocations (the device
// counts calls, not their peak) and the baselines reset_accumulated_memory_stats subtracts. The
// counts are atomics (every allocation and free touches them: no lock on the per-op path); the
// mutex guards only the baselines.
struct DeviceCounters {
  // live = allocs - frees: one atomic add per allocation and one per free (the peak is
  // compared with a plain load and written only when it grows)
  std::atomic<int64_t> peak{0}, allocs{0}, frees{0};
  std::mutex mu;
  kiln_memory_stats_t base = {};

  void increase() {
    int64_t v = allocs.fetch_add(1, std::memory_order_relaxed) + 1 - frees.load(std::memory_order_relaxed);
    int64_t p = peak.load(std::memory_order_relaxed);
    while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
    }
  }
  void decrease() { frees.fetch_add(1, std::memory_order_relaxed); }
  int64_t live() const {
    return allocs.load(std::memory_order_relaxed) - frees.load(std::memory_order_relaxed);
  }
  Stat stat() const {
    Stat st;
    st.current = live();
    st.peak = peak.load(std::memory_order_relaxed);
    st.allocated = allocs.load(std::memory_order_relaxed);
    st.freed = frees.load(std::memory_order_relaxed);
    return st;
  }
};

// Never destroyed: tensors freed during process exit still count here.
std::array<DeviceCounters, KILN_MAX_DEVICES>& all_counters() {
  static auto* c = new std::array<DeviceCounters, KILN_MAX_DEVICES>();
  return *c;
}

DeviceCounters& counters(c10::DeviceIndex index) {
  TORCH_CHECK_INDEX(index >= 0 && index < KILN_MAX_DEVICES, "kiln: device index ",
                    static_cast<int>(index), " out of range");
  return all_counters()[static_cast<size_t>(index)];
}

kiln_memory_stats_t device_stats(c10::DeviceIndex index) {
  kiln_memory_stats_t s = {};
  s.struct_size = sizeof(s);
  check(kiln_device_memory_stats(device(index), &s), "memory_stats");
  return s;
}

template <int I>
void delete_on_device(void* ptr) {
  if (ptr == nullptr) return;
  kiln_registry_t* reg = nullptr;
  kiln_device_t* dev = nullptr;
  if (kiln_registry_default(&reg) == KILN_OK && kiln_registry_get(reg, I, &dev) == KILN_OK) {
    kiln_device_free(dev, ptr);
    all_counters()[I].decrease();
  }
}

template <int... I>
constexpr std::array<c10::DeleterFnPtr, sizeof...(I)> make_deleters(std::integer_sequence<int, I...>) {
  return {&delete_on_device<I>...};
}

constexpr auto kDeleters = make_deleters(std::make_integer_sequence<int, KILN_MAX_DEVICES>{});

uint64_t host_bytes(int name) {
  long pages = sysconf(name), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

struct KilnAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex index = current_device();
    kiln_device_t* dev = device(index);
    void* ptr = nullptr;
    if (nbytes > 0) {
      // Async work may still be freeing blocks; the device allocator handles limits itself.
      check(kiln_device_alloc(dev, nbytes, &ptr), "alloc");
      counters(index).increase();
    }
    return {ptr, ptr, kDeleters[index], c10::Device(c10::DeviceType::PrivateUse1, index)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    kiln_device_t* dev = device(current_device());
    check(kiln_device_copy(dev, nullptr, KILN_COPY_DEVICE_TO_DEVICE, dest, src, count), "copy");
    check(kiln_device_synchronize(dev), "synchronize");
  }

  bool initialized() override { return device_count() > 0; }

  // Kiln has no memory pools: the id is accepted and every device's cache is emptied.
  void emptyCache(c10::MempoolId_t) override {
    for (c10::DeviceIndex i = 0; i < device_count(); i++) empty_cache(i);
  }

  // Eager work runs on each device's one stream in order, so a block freed after its last use
  // is never handed out under queued work: nothing to record.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex index) override {
    kiln_memory_stats_t s = device_stats(index);
    DeviceCounters& c = counters(index);
    std::lock_guard<std::mutex> lock(c.mu);
    const kiln_memory_stats_t& b = c.base;
    DeviceStats out;
    Stat& alloc_bytes = out.allocated_bytes[kAll];
    alloc_bytes.current = static_cast<int64_t>(s.allocated);
    alloc_bytes.peak = static_cast<int64_t>(s.peak_allocated);
    alloc_bytes.allocated = static_cast<int64_t>(s.total_allocated - b.total_allocated);
    alloc_bytes.freed = static_cast<int64_t>(s.total_freed - b.total_freed);
    // A freed block is reusable at once (one stream per device): active == allocated.
    out.active_bytes[kAll] = alloc_bytes;
    Stat& reserved = out.reserved_bytes[kAll];
    reserved.current = static_cast<int64_t>(s.reserved);
    reserved.peak = static_cast<int64_t>(s.peak_reserved);
    reserved.allocated = static_cast<int64_t>(s.total_reserved - b.total_reserved);
    reserved.freed = static_cast<int64_t>(s.total_released - b.total_released);
    out.allocation[kAll] = c.stat();
    out.active[kAll] = out.allocation[kAll];
    out.num_alloc_retries = static_cast<int64_t>(s.num_alloc_retries - b.num_alloc_retries);
    out.num_ooms = static_cast<int64_t>(s.num_ooms - b.num_ooms);
    out.num_device_alloc = static_cast<int64_t>(s.num_system_allocs - b.num_system_allocs);
    out.num_device_free = static_cast<int64_t>(s.num_system_frees - b.num_system_frees);
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex index) override {
    kiln_memory_stats_t s = device_stats(index);
    DeviceCounters& c = counters(index);
    std::lock_guard<std::mutex> lock(c.mu);
    c.base = s;
    c.allocs.store(0, std::memory_order_relaxed);
    c.frees.store(0, std::memory_order_relaxed);
  }

  void resetPeakStats(c10::DeviceIndex index) override {
    check(kiln_device_memory_reset_peak(device(index)), "memory_reset_peak");
    DeviceCounters& c = counters(index);
    c.peak.store(c.live(), std::memory_order_relaxed);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
    MemoryInfo m = memory_info(index);
    return {static_cast<size_t>(m.free), static_cast<size_t>(m.total)};
  }
};

KilnAllocator g_allocator;

}  // namespace

c10::Allocator* allocator() { return &g_allocator; }

c10::DeviceAllocator* device_allocator() { return &g_allocator; }

void empty_cache(c10::DeviceIndex index) {
  kiln_device_t* dev = device(index);
  check(kiln_device_synchronize(dev), "synchronize");
  check(kiln_device_memory_empty_cache(dev), "memory_empty_cache");
}

MemoryInfo memory_info(c10::DeviceIndex index) {
  kiln_device_props_t p = {};
  p.struct_size = sizeof(p);
  check(kiln_device_props(device(index), &p), "props");
  // Kiln device memory is host memory (KILN_CAP_HOST_VISIBLE on both drivers); a device with a
  // limit has that much, one without shares the host's.
  uint64_t host_total = host_bytes(_SC_PHYS_PAGES), host_free = host_bytes(_SC_AVPHYS_PAGES);
  if (p.memory_limit == 0) return {host_free, host_total};
  kiln_memory_stats_t s = device_stats(index);
  uint64_t left = s.reserved < p.memory_limit ? p.memory_limit - s.reserved : 0;
  // Cached blocks are reusable, but the host may not have room for the rest of the limit.
  uint64_t cached = s.reserved - s.allocated;
  return {std::min(left, host_free) + cached, p.memory_limit};
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_kiln
