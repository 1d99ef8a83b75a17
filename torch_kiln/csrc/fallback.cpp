/* SPDX-License-Identifier: Apache-2.0 */
// fallback.cpp - every aten op without a native kiln kernel runs on the CPU through
// at::native::cpu_fallback: inputs are copied to the host, the CPU kernel runs, results are
// copied back. Each op is counted and warned about once; random ops draw their CPU generator
// from the kiln device generator so torch.kiln.manual_seed makes them reproducible.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "kiln_torch.h"

namespace torch_kiln {

namespace {

std::mutex g_mutex;
std::map<std::string, int64_t> g_counts;

bool fallback_is_error() {
  static const bool error = [] {
    const char* v = std::getenv("TORCH_KILN_FALLBACK");
    return v && std::string(v) == "error";
  }();
  return error;
}

}  // namespace

void record_fallback(const std::string& key);

namespace {

// Replaces None / kiln generators in the stack with fresh CPU generators seeded from the kiln
// generator, so the CPU kernel is reproducible under torch.kiln.manual_seed.
void substitute_generators(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); i++) {
    const c10::TypePtr& type = args[i].type();
    bool is_gen = type->kind() == c10::TypeKind::GeneratorType;
    if (type->kind() == c10::TypeKind::OptionalType)
      is_gen = type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
    if (!is_gen) continue;
    c10::IValue& v = (*stack)[base + i];
    at::Generator src_gen;
    if (v.isNone()) {
      src_gen = default_generator(current_device());
    } else {
      src_gen = v.toGenerator();
      if (src_gen.device().is_cpu()) continue;
    }
    uint64_t seed;
    {
      // A fresh CPU seed per call, derived from (seed, offset); the offset then advances.
      std::lock_guard<std::mutex> lock(src_gen.mutex());
      uint64_t x = src_gen.current_seed() ^ (0x9E3779B97F4A7C15ull * (src_gen.get_offset() + 1));
      x ^= x >> 31;
      x *= 0xBF58476D1CE4E5B9ull;
      seed = x ^ (x >> 29);
      src_gen.set_offset(src_gen.get_offset() + 1);
    }
    v = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(seed));
  }
}

// cpu_fallback returns results on the device of the first tensor argument. When that is a CPU
// scalar and a later operand is a kiln tensor (5 // x runs as floor_divide(cpu_scalar, x)), the
// results belong on that kiln device, as on CUDA. Returns the device to move them to, if any.
std::optional<c10::Device> misplaced_result_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const size_t n = op.schema().arguments().size();
  std::optional<c10::Device> first, kiln;
  auto see = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (!first) first = t.device();
    if (!kiln && t.is_privateuseone()) kiln = t.device();
  };
  for (size_t i = stack.size() - n; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) see(v.toTensor());
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList().vec()) see(t);
  }
  if (first && first->is_cpu() && kiln) return kiln;
  return std::nullopt;
}

void kiln_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  record_fallback(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
  // Everything queued on the devices must land before the CPU reads or writes kiln memory.
  for (c10::DeviceIndex i = 0; i < device_count(); i++) synchronize(i);
  substitute_generators(op, stack);
  std::optional<c10::Device> move_to = misplaced_result_device(op, *stack);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
  if (!move_to) return;
  const auto& returns = op.schema().returns();
  const size_t base = stack->size() - returns.size();
  for (size_t i = 0; i < returns.size(); i++) {
    c10::IValue& v = (*stack)[base + i];
    if (returns[i].alias_info() || !v.isTensor()) continue;  // out= / in-place results stay put
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.is_cpu()) v = c10::IValue(t.to(*move_to));
  }
}

}  // namespace

void boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { kiln_fallback(op, stack); }

void record_fallback(const std::string& key) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    first = g_counts[key]++ == 0;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error(), "kiln: ", key,
                              " has no native kiln kernel (TORCH_KILN_FALLBACK=error)");
  if (first)
    TORCH_WARN("kiln: ", key, " has no native kiln kernel; running it on the CPU (fallback). "
               "See torch_kiln.fallback_report().");
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_counts;
}

void fallback_reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counts.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&kiln_fallback>());
}

}  // namespace torch_kiln
