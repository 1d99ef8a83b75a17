// api.cpp - torch.ops.kiln.*: the functions torch_kiln's Python layer calls (device queries,
// memory statistics, seeding, the fallback report).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/library.h>

#include <map>
#include <tuple>

#include "kiln_torch.h"

namespace torch_kiln {

std::map<std::string, int64_t> fallback_counts();
void fallback_reset();

namespace {

int64_t op_device_count() { return device_count(); }

int64_t op_current_device() { return current_device(); }

void op_set_device(int64_t index) { set_current_device(static_cast<c10::DeviceIndex>(index)); }

void op_synchronize(int64_t index) { synchronize(static_cast<c10::DeviceIndex>(index)); }

// [allocated, reserved, peak_allocated, peak_reserved, num_allocs, num_frees, num_cache_hits]
std::vector<int64_t> op_memory_stats(int64_t index) {
  kiln_memory_stats_t s = {};
  s.struct_size = sizeof(s);
  KILN_CHECK(kiln_device_memory_stats(device(static_cast<c10::DeviceIndex>(index)), &s));
  return {(int64_t)s.allocated,  (int64_t)s.reserved,  (int64_t)s.peak_allocated,
          (int64_t)s.peak_reserved, (int64_t)s.num_allocs, (int64_t)s.num_frees,
          (int64_t)s.num_cache_hits};
}

void op_reset_peak(int64_t index) {
  KILN_CHECK(kiln_device_memory_reset_peak(device(static_cast<c10::DeviceIndex>(index))));
}

void op_empty_cache(int64_t index) {
  kiln_device_t* dev = device(static_cast<c10::DeviceIndex>(index));
  KILN_CHECK(kiln_device_synchronize(dev));
  KILN_CHECK(kiln_device_memory_empty_cache(dev));
}

// [name, description, memory_limit, compute_units, capabilities]
std::tuple<std::string, std::string, int64_t, int64_t, int64_t> op_device_props(int64_t index) {
  kiln_device_props_t p = {};
  p.struct_size = sizeof(p);
  KILN_CHECK(kiln_device_props(device(static_cast<c10::DeviceIndex>(index)), &p));
  return {p.name, p.description, (int64_t)p.memory_limit, (int64_t)p.compute_units,
          (int64_t)p.capabilities};
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
  m.def("memory_stats(int device) -> int[]", op_memory_stats);
  m.def("reset_peak_memory_stats(int device) -> ()", op_reset_peak);
  m.def("empty_cache(int device) -> ()", op_empty_cache);
  m.def("device_props(int device) -> (str, str, int, int, int)", op_device_props);
  m.def("manual_seed(int device, int seed) -> ()", op_manual_seed);
  m.def("initial_seed(int device) -> int", op_initial_seed);
  m.def("seed(int device) -> int", op_seed);
  m.def("get_rng_state(int device) -> Tensor", op_get_rng_state);
  m.def("set_rng_state(int device, Tensor state) -> ()", op_set_rng_state);
  m.def("fallback_report() -> (str[], int[])", op_fallback_report);
  m.def("fallback_reset() -> ()", op_fallback_reset);
}

}  // namespace torch_kiln
