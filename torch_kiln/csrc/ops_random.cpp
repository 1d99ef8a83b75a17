/* SPDX-License-Identifier: Apache-2.0 */
// ops_random.cpp - native kiln random ops on the device generator (counter-based Philox):
// uniform_, normal_, exponential_, bernoulli(_), random_, randperm, native_dropout.
#include <ATen/ops/bernoulli.h>
#include <ATen/ops/exponential.h>
#include <ATen/ops/native_dropout.h>
#include <ATen/ops/normal.h>
#include <ATen/ops/random.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/uniform.h>
#include <torch/library.h>

#include <cmath>

#include "generator.h"
#include "ops_common.h"

namespace torch_kiln {
namespace {

using at::Tensor;

// Runs `draw(desc, philox)` under the generator's lock. Returns false (nothing drawn) when the
// tensor has no kiln descriptor.
template <class F>
bool draw(Tensor& self, const std::optional<at::Generator>& gen, F&& f) {
  if (!describable(self)) return false;
  if (self.numel() == 0) return true;
  at::assert_no_internal_overlap(self);
  at::Generator g = pick_generator(gen, self.device());
  std::lock_guard<std::mutex> lock(g.mutex());
  kiln_tensor_t d = describe(self);
  KILN_CHECK(f(&d, g.get<KilnGeneratorImpl>()->philox()));
  return true;
}

Tensor& uniform_(Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "uniform_ expects a floating point tensor, got ",
              self.scalar_type());
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  TORCH_CHECK(std::isfinite(to - from), "uniform_ expects to-from <= std::numeric_limits<", self.scalar_type(),
              ">::max(), but found to=", to, " and from=", from, " which result in to-from to exceed the limit");
  if (draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* p) { return kiln_kernel_uniform(d, from, to, p); }))
    return self;
  return KILN_FALLBACK(uniform_, self, from, to, gen);
}

Tensor& normal_(Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "normal_ expects a floating point tensor, got ",
              self.scalar_type());
  if (draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* p) { return kiln_kernel_normal(d, mean, std, p); }))
    return self;
  return KILN_FALLBACK(normal_, self, mean, std, gen);
}

Tensor& exponential_(Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "Exponential distribution is a continuous probability "
              "distribution. dtype must be a floating point but you specified ", self.scalar_type());
  if (draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* p) { return kiln_kernel_exponential(d, lambd, p); }))
    return self;
  return KILN_FALLBACK(exponential_, self, lambd, gen);
}

Tensor& bernoulli_float(Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* ph) { return kiln_kernel_bernoulli_scalar(d, p, ph); }))
    return self;
  return KILN_FALLBACK(bernoulli__float, self, p, gen);
}

Tensor& bernoulli_tensor(Tensor& self, const Tensor& p, std::optional<at::Generator> gen) {
  TORCH_CHECK(at::isFloatingType(p.scalar_type()), "expected probabilities tensor to have floating type, got ",
              p.scalar_type());
  check_device(self, p);
  if (describable(p) &&
      draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* ph) {
        kiln_tensor_t dp = describe(p);
        return kiln_kernel_bernoulli_tensor(d, &dp, ph);
      }))
    return self;
  return KILN_FALLBACK(bernoulli__Tensor, self, p, gen);
}

Tensor bernoulli(const Tensor& self, std::optional<at::Generator> gen) {
  Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return bernoulli_tensor(out, self, gen);
}

// [0, 2^digits] for floats, [0, max] for integers (torch random_() without bounds).
int64_t random_upper(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return (int64_t{1} << 24) + 1;
    case at::kDouble: return (int64_t{1} << 53) + 1;
    case at::kHalf: return (int64_t{1} << 11) + 1;
    case at::kBFloat16: return (int64_t{1} << 8) + 1;
    case at::kBool: return 2;
    case at::kByte: return 256;
    case at::kChar: return 128;
    case at::kShort: return 32768;
    case at::kInt: return int64_t{1} << 31;
    default: return 0;  // int64: full range; not representable as an exclusive bound
  }
}

// kiln's kernel draws integers a float dtype holds exactly. aten also takes a wider [from, to)
// for a float dtype (it warns; it raises beyond the dtype's range): those go to aten's kernel.
bool exact_in(at::ScalarType t, int64_t from, int64_t to_exclusive) {
  if (!at::isFloatingType(t)) return true;
  int64_t lim = random_upper(t) - 1;
  return from >= -lim && to_exclusive - 1 <= lim;
}

Tensor& random_from(Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  int64_t hi = to.has_value() ? *to : random_upper(self.scalar_type());
  TORCH_CHECK(!to.has_value() || from < *to, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", *to);
  if (hi != 0 && from < hi && exact_in(self.scalar_type(), from, hi) &&
      draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* p) { return kiln_kernel_random_int(d, from, hi, p); }))
    return self;
  return KILN_FALLBACK(random__from, self, from, to, gen);
}

Tensor& random_to(Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < to, "random_ expects 'from' to be less than 'to', but got from=0 >= to=", to);
  if (exact_in(self.scalar_type(), 0, to) &&
      draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* p) { return kiln_kernel_random_int(d, 0, to, p); }))
    return self;
  return KILN_FALLBACK(random__to, self, to, gen);
}

Tensor& random_(Tensor& self, std::optional<at::Generator> gen) {
  int64_t hi = random_upper(self.scalar_type());
  if (hi != 0 &&
      draw(self, gen, [&](kiln_tensor_t* d, kiln_philox_t* p) { return kiln_kernel_random_int(d, 0, hi, p); }))
    return self;
  return KILN_FALLBACK(random_, self, gen);
}

Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  at::native::resize_output(out, {n});
  if (draw(out, gen, [&](kiln_tensor_t* d, kiln_philox_t* p) { return kiln_kernel_randperm(d, n, p); }))
    return out;
  return KILN_FALLBACK(randperm_generator_out, n, gen, out);
}

std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(0 <= p && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  bool training = !train.has_value() || *train;
  if (!at::isFloatingType(input.scalar_type()) || !describable(input))
    return KILN_FALLBACK(native_dropout, input, p, train);
  Tensor out = at::empty_like(input);
  Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  if (input.numel() == 0) return {out, mask};
  kiln_tensor_t dx = describe(input), dout = describe(out), dm = describe(mask);
  if (!training) {
    KILN_CHECK(kiln_kernel_dropout(&dx, p, 0, &dout, &dm, nullptr));
    return {out, mask};
  }
  at::Generator g = default_generator(input.device().index());
  std::lock_guard<std::mutex> lock(g.mutex());
  KILN_CHECK(kiln_kernel_dropout(&dx, p, 1, &dout, &dm, g.get<KilnGeneratorImpl>()->philox()));
  return {out, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("exponential_", exponential_);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("bernoulli", bernoulli);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("random_", random_);
  m.impl("randperm.generator_out", randperm_out);
  m.impl("native_dropout", native_dropout);
}

}  // namespace torch_kiln
