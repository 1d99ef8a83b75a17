/* SPDX-License-Identifier: Apache-2.0 */
// api.cpp - torch.ops.kiln.*: the functions torch_kiln's Python layer calls (device queries,
// memory statistics, seeding, the fallback report).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/library.h>

#include <map>
#include <tuple>

#include "kiln_torch.h"
#include "memory.h"

namespace torch_kiln {

std::map<std::string, int64_t> fallback_counts();
void fallback_reset();

namespace {

int64_t op_device_count() { return device_count(); }

int64_t op_current_device() { return current_device(); }

void op_set_device(int64_t index) { set_current_device(static_cast<c10::DeviceIndex>(index)); }

void op_synchronize(int64_t index) { synchronize(static_cast<c10::DeviceIndex>(index)); }

void append_stat(std::vector<std::string>& names, std::vector<int64_t>& values,
                 const std::string& name, const c10::CachingAllocator::Stat& st) {
  const char* parts[] = {"current", "peak", "allocated", "freed"};
  const int64_t vals[] = {st.current, st.peak, st.allocated, st.freed};
  for (int i = 0; i < 4; i++) {
    names.push_back(name + ".all." + parts[i]);
    values.push_back(vals[i]);
  }
}

// torch.cuda.memory_stats()'s names for what the kiln allocator tracks (pool "all" only: kiln
// has no small/large pools), as parallel lists.
std::tuple<std::vector<std::string>, std::vector<int64_t>> op_memory_stats(int64_t index) {
  auto s = device_allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(index));
  constexpr size_t all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  std::vector<std::string> names;
  std::vector<int64_t> values;
  append_stat(names, values, "active", s.active[all]);
  append_stat(names, values, "active_bytes", s.active_bytes[all]);
  append_stat(names, values, "allocated_bytes", s.allocated_bytes[all]);
  append_stat(names, values, "allocation", s.allocation[all]);
  append_stat(names, values, "reserved_bytes", s.reserved_bytes[all]);
  const std::pair<const char*, int64_t> counters[] = {
      {"num_alloc_retries", s.num_alloc_retries},
      {"num_device_alloc", s.num_device_alloc},
      {"num_device_free", s.num_device_free},
      {"num_ooms", s.num_ooms},
  };
  for (const auto& kv : counters) {
    names.push_back(kv.first);
    values.push_back(kv.second);
  }
  return {names, values};
}

void op_reset_peak(int64_t index) {
  device_allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(index));
}

void op_reset_accumulated(int64_t index) {
  device_allocator()->resetAccumulatedStats(static_cast<c10::DeviceIndex>(index));
}

void op_empty_cache(int64_t index) { empty_cache(static_cast<c10::DeviceIndex>(index)); }

// (free, total) bytes
std::tuple<int64_t, int64_t> op_mem_get_info(int64_t index) {
  MemoryInfo m = memory_info(static_cast<c10::DeviceIndex>(index));
  return {static_cast<int64_t>(m.free), static_cast<int64_t>(m.total)};
}

// [name, description, memory_limit, compute_units, alignment, capabilities]
std::tuple<std::string, std::string, int64_t, int64_t, int64_t, int64_t> op_device_props(
    int64_t index) {
  kiln_device_props_t p = {};
  p.struct_size = sizeof(p);
  KILN_CHECK(kiln_device_props(device(static_cast<c10::DeviceIndex>(index)), &p));
  return {p.name, p.description, (int64_t)p.memory_limit, (int64_t)p.compute_units,
          (int64_t)p.alignment, (int64_t)p.capabilities};
}

at::Generator generator(int64_t index) {
  return default_generator(static_cast<c10::DeviceIndex>(index));
}

void op_manual_seed(int64_t index, int64_t seed) {
  at::Generator g = generator(index);
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(static_cast<uint64_t>(seed));
}

int64_t op_initial_seed(int64_t index) {
  at::Generator g = generator(index);
  std::lock_guard<std::mutex> lock(g.mutex());
  return static_cast<int64_t>(g.current_seed());
}

int64_t op_seed(int64_t index) {
  at::Generator g = generator(index);
  std::lock_guard<std::mutex> lock(g.mutex());
  uint64_t s = c10::detail::getNonDeterministicRandom();
  g.set_current_seed(s);
  return static_cast<int64_t>(s);
}

at::Tensor op_get_rng_state(int64_t index) {
  at::Generator g = generator(index);
  std::lock_guard<std::mutex> lock(g.mutex());
  return at::Tensor(g.get_state());
}

void op_set_rng_state(int64_t index, const at::Tensor& state) {
  at::Generator g = generator(index);
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

std::tuple<std::vector<std::string>, std::vector<int64_t>> op_fallback_report() {
  std::vector<std::string> names;
  std::vector<int64_t> counts;
  for (const auto& kv : fallback_counts()) {
    names.push_back(kv.first);
    counts.push_back(kv.second);
  }
  return {names, counts};
}

void op_fallback_reset() { fallback_reset(); }

}  // namespace

TORCH_LIBRARY(kiln, m) {
  m.def("device_count() -> int", op_device_count);
  m.def("current_device() -> int", op_current_device);
  m.def("set_device(int device) -> ()", op_set_device);
  m.def("synchronize(int device) -> ()", op_synchronize);
  m.def("memory_stats(int device) -> (str[], int[])", op_memory_stats);
  m.def("reset_peak_memory_stats(int device) -> ()", op_reset_peak);
  m.def("reset_accumulated_memory_stats(int device) -> ()", op_reset_accumulated);
  m.def("empty_cache(int device) -> ()", op_empty_cache);
  m.def("mem_get_info(int device) -> (int, int)", op_mem_get_info);
  m.def("device_props(int device) -> (str, str, int, int, int, int)", op_device_props);
  m.def("manual_seed(int device, int seed) -> ()", op_manual_seed);
  m.def("initial_seed(int device) -> int", op_initial_seed);
  m.def("seed(int device) -> int", op_seed);
  m.def("get_rng_state(int device) -> Tensor", op_get_rng_state);
  m.def("set_rng_state(int device, Tensor state) -> ()", op_set_rng_state);
  m.def("fallback_report() -> (str[], int[])", op_fallback_report);
  m.def("fallback_reset() -> ()", op_fallback_reset);
}

}  // namespace torch_kiln
