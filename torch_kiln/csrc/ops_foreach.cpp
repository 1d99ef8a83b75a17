/* SPDX-License-Identifier: Apache-2.0 */
// ops_foreach.cpp - torch._foreach_* on kiln (the multi-tensor ops behind the default
// foreach=True optimizers and clip_grad_norm_): one call into kiln_kernel_foreach_* runs the
// op over every entry, instead of one framework dispatch per tensor. Lists kiln cannot take
// (non-floating dtypes, mixed dtypes/shapes/devices, partial overlap, complex scalars) go to
// ATen's per-tensor reference loops, which dispatch each entry to the single-tensor kiln ops.
#include <ATen/MemoryOverlap.h>
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/elementwise.h"
}

namespace torch_kiln {
namespace {

using at::Scalar;
using at::Tensor;
using at::TensorList;
using ScalarList = at::ArrayRef<Scalar>;

bool float_dtype(const Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16;
}

// Every entry: kiln floating tensors of self[i]'s dtype, shape and device, which kiln can
// describe; in place, self[i] is dense and nothing overlaps it except exactly.
bool fast(TensorList self, std::initializer_list<TensorList> others, bool inplace) {
  if (self.empty()) return false;
  const c10::Device dev = self[0].device();
  for (size_t i = 0; i < self.size(); i++) {
    const Tensor& s = self[i];
    if (!s.defined() || !s.is_privateuseone() || s.device() != dev || !float_dtype(s) || !describable(s))
      return false;
    if (inplace && !s.is_non_overlapping_and_dense()) return false;
    for (TensorList l : others) {
      const Tensor& t = l[i];
      if (!t.defined() || t.device() != dev || t.scalar_type() != s.scalar_type() || !t.sizes().equals(s.sizes()) ||
          !describable(t))
        return false;
      if (inplace && !t.is_same(s)) {
        const auto st = at::get_overlap_status(s, t);
        if (st == at::MemOverlapStatus::Partial || st == at::MemOverlapStatus::TooHard) return false;
      }
    }
  }
  return true;
}

bool real_scalars(ScalarList sc, size_t n) {
  if (sc.size() != n) return false;
  for (const Scalar& s : sc)
    if (s.isComplex()) return false;
  return true;
}

// Descriptors of one list and pointers to them (the C API takes arrays of pointers).
struct Descs {
  std::vector<kiln_tensor_t> d;
  std::vector<kiln_tensor_t*> p;
  explicit Descs(TensorList l) : d(l.size()), p(l.size()) {
    for (size_t i = 0; i < l.size(); i++) {
      d[i] = describe(l[i]);
      p[i] = &d[i];
    }
  }
  kiln_tensor_t* const* ptr() { return p.data(); }
};

std::vector<Tensor> empty_like_all(TensorList self) {
  std::vector<Tensor> out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(at::empty_like(t));
  return out;
}

std::vector<double> doubles(ScalarList sc) {
  std::vector<double> v;
  v.reserve(sc.size());
  for (const Scalar& s : sc) v.push_back(s.toDouble());
  return v;
}

// ---- drivers: `out` is self (in place) or fresh tensors -------------------------------------

void bin(kiln_binary_op_t op, TensorList self, const TensorList* other, const double* scalars, double scalar,
         double alpha, TensorList out) {
  Descs a(self), o(out);
  std::optional<Descs> b;
  if (other) b.emplace(*other);
  KILN_CHECK(kiln_kernel_foreach_binary(op, static_cast<int>(self.size()), a.ptr(), b ? b->ptr() : nullptr, scalars,
                                        scalar, alpha, o.ptr()));
}

void tern(kiln_ternary_op_t op, TensorList self, TensorList t1, const TensorList* t2, const double* scalars,
          double scalar, TensorList out) {
  Descs a(self), b(t1), o(out);
  std::optional<Descs> c;
  if (t2) c.emplace(*t2);
  KILN_CHECK(kiln_kernel_foreach_ternary(op, static_cast<int>(self.size()), a.ptr(), b.ptr(), c ? c->ptr() : nullptr,
                                         scalars, scalar, o.ptr()));
}

// ---- binary: Scalar, ScalarList, List -------------------------------------------------------

#define KILN_FOREACH_BINARY(name, KOP)                                                             \
  void name##_scalar_(TensorList self, const Scalar& s) {                                                \
    at::native::check_foreach_api_restrictions(self);                                                    \
    if (!s.isComplex() && fast(self, {}, true)) return bin(KOP, self, nullptr, nullptr, s.toDouble(), 1.0, self); \
    at::native::foreach_tensor_##name##_scalar_kernel_slow_(self, s);                                   \
  }                                                                                                      \
  std::vector<Tensor> name##_scalar(TensorList self, const Scalar& s) {                                  \
    at::native::check_foreach_api_restrictions(self);                                                    \
    if (s.isComplex() || !fast(self, {}, false)) return at::native::foreach_tensor_##name##_scalar_kernel_slow(self, s); \
    auto out = empty_like_all(self);                                                                     \
    bin(KOP, self, nullptr, nullptr, s.toDouble(), 1.0, out);                                            \
    return out;                                                                                          \
  }                                                                                                      \
  void name##_scalarlist_(TensorList self, ScalarList sc) {                                              \
    at::native::check_foreach_api_restrictions(self, sc);                                                \
    if (real_scalars(sc, self.size()) && fast(self, {}, true)) {                                         \
      auto v = doubles(sc);                                                                              \
      return bin(KOP, self, nullptr, v.data(), 0.0, 1.0, self);                                          \
    }                                                                                                    \
    at::native::foreach_tensor_##name##_scalarlist_kernel_slow_(self, sc);                              \
  }                                                                                                      \
  std::vector<Tensor> name##_scalarlist(TensorList self, ScalarList sc) {                                \
    at::native::check_foreach_api_restrictions(self, sc);                                                \
    if (!real_scalars(sc, self.size()) || !fast(self, {}, false))                                        \
      return at::native::foreach_tensor_##name##_scalarlist_kernel_slow(self, sc);                      \
    auto v = doubles(sc);                                                                                \
    auto out = empty_like_all(self);                                                                     \
    bin(KOP, self, nullptr, v.data(), 0.0, 1.0, out);                                                    \
    return out;                                                                                          \
  }

KILN_FOREACH_BINARY(add, KILN_BINARY_ADD)
KILN_FOREACH_BINARY(sub, KILN_BINARY_SUB)
KILN_FOREACH_BINARY(mul, KILN_BINARY_MUL)
KILN_FOREACH_BINARY(div, KILN_BINARY_DIV)
#undef KILN_FOREACH_BINARY

// List variants: add/sub take alpha, mul/div do not.
#define KILN_FOREACH_LIST_ALPHA(name, KOP)                                                                \
  void name##_list_(TensorList self, TensorList other, const Scalar& alpha) {                             \
    at::native::check_foreach_api_restrictions(self, other);                                              \
    if (!alpha.isComplex() && fast(self, {other}, true))                                                  \
      return bin(KOP, self, &other, nullptr, 0.0, alpha.toDouble(), self);                                \
    at::native::foreach_tensor_##name##_list_kernel_slow_(self, other, alpha);                           \
  }                                                                                                       \
  std::vector<Tensor> name##_list(TensorList self, TensorList other, const Scalar& alpha) {               \
    at::native::check_foreach_api_restrictions(self, other);                                              \
    if (alpha.isComplex() || !fast(self, {other}, false))                                                 \
      return at::native::foreach_tensor_##name##_list_kernel_slow(self, other, alpha);                   \
    auto out = empty_like_all(self);                                                                      \
    bin(KOP, self, &other, nullptr, 0.0, alpha.toDouble(), out);                                          \
    return out;                                                                                           \
  }
KILN_FOREACH_LIST_ALPHA(add, KILN_BINARY_ADD)
KILN_FOREACH_LIST_ALPHA(sub, KILN_BINARY_SUB)
#undef KILN_FOREACH_LIST_ALPHA

#define KILN_FOREACH_LIST(name, KOP)                                                                      \
  void name##_list_(TensorList self, TensorList other) {                                                  \
    at::native::check_foreach_api_restrictions(self, other);                                              \
    if (fast(self, {other}, true)) return bin(KOP, self, &other, nullptr, 0.0, 1.0, self);                \
    at::native::foreach_tensor_##name##_list_kernel_slow_(self, other);                                  \
  }                                                                                                       \
  std::vector<Tensor> name##_list(TensorList self, TensorList other) {                                    \
    at::native::check_foreach_api_restrictions(self, other);                                              \
    if (!fast(self, {other}, false)) return at::native::foreach_tensor_##name##_list_kernel_slow(self, other); \
    auto out = empty_like_all(self);                                                                      \
    bin(KOP, self, &other, nullptr, 0.0, 1.0, out);                                                       \
    return out;                                                                                           \
  }
KILN_FOREACH_LIST(mul, KILN_BINARY_MUL)
KILN_FOREACH_LIST(div, KILN_BINARY_DIV)
#undef KILN_FOREACH_LIST

// ---- lerp -----------------------------------------------------------------------------------

void lerp_scalar_(TensorList self, TensorList end, const Scalar& w) {
  at::native::check_foreach_api_restrictions(self, end);
  if (!w.isComplex() && fast(self, {end}, true))
    return tern(KILN_TERNARY_LERP, self, end, nullptr, nullptr, w.toDouble(), self);
  at::native::foreach_tensor_lerp_list_kernel_slow_(self, end, w);
}
std::vector<Tensor> lerp_scalar(TensorList self, TensorList end, const Scalar& w) {
  at::native::check_foreach_api_restrictions(self, end);
  if (w.isComplex() || !fast(self, {end}, false)) return at::native::foreach_tensor_lerp_list_kernel_slow(self, end, w);
  auto out = empty_like_all(self);
  tern(KILN_TERNARY_LERP, self, end, nullptr, nullptr, w.toDouble(), out);
  return out;
}
void lerp_scalarlist_(TensorList self, TensorList end, ScalarList w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (real_scalars(w, self.size()) && fast(self, {end}, true)) {
    auto v = doubles(w);
    return tern(KILN_TERNARY_LERP, self, end, nullptr, v.data(), 0.0, self);
  }
  at::native::foreach_tensor_lerp_scalarlist_kernel_slow_(self, end, w);
}
std::vector<Tensor> lerp_scalarlist(TensorList self, TensorList end, ScalarList w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (!real_scalars(w, self.size()) || !fast(self, {end}, false))
    return at::native::foreach_tensor_lerp_scalarlist_kernel_slow(self, end, w);
  auto v = doubles(w);
  auto out = empty_like_all(self);
  tern(KILN_TERNARY_LERP, self, end, nullptr, v.data(), 0.0, out);
  return out;
}
void lerp_list_(TensorList self, TensorList end, TensorList w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (fast(self, {end, w}, true)) return tern(KILN_TERNARY_LERP, self, end, &w, nullptr, 0.0, self);
  at::native::foreach_tensor_ternary_lerp_slow_(self, end, w);
}
std::vector<Tensor> lerp_list(TensorList self, TensorList end, TensorList w) {
  at::native::check_foreach_api_restrictions(self, end, w);
  if (!fast(self, {end, w}, false)) return at::native::foreach_tensor_ternary_lerp_slow(self, end, w);
  auto out = empty_like_all(self);
  tern(KILN_TERNARY_LERP, self, end, &w, nullptr, 0.0, out);
  return out;
}

// ---- addcmul / addcdiv ----------------------------------------------------------------------

#define KILN_FOREACH_ADDC(name, KOP)                                                                      \
  void name##_scalar_(TensorList self, TensorList t1, TensorList t2, const Scalar& v) {                   \
    at::native::check_foreach_api_restrictions(self, t1, t2);                                             \
    if (!v.isComplex() && fast(self, {t1, t2}, true))                                                     \
      return tern(KOP, self, t1, &t2, nullptr, v.toDouble(), self);                                       \
    at::native::foreach_tensor_##name##_scalar_slow_(self, t1, t2, v);                                   \
  }                                                                                                       \
  std::vector<Tensor> name##_scalar(TensorList self, TensorList t1, TensorList t2, const Scalar& v) {     \
    at::native::check_foreach_api_restrictions(self, t1, t2);                                             \
    if (v.isComplex() || !fast(self, {t1, t2}, false))                                                    \
      return at::native::foreach_tensor_##name##_scalar_slow(self, t1, t2, v);                           \
    auto out = empty_like_all(self);                                                                      \
    tern(KOP, self, t1, &t2, nullptr, v.toDouble(), out);                                                 \
    return out;                                                                                           \
  }                                                                                                       \
  void name##_scalarlist_(TensorList self, TensorList t1, TensorList t2, ScalarList sc) {                 \
    at::native::check_foreach_api_restrictions(self, t1, t2, sc);                                         \
    if (real_scalars(sc, self.size()) && fast(self, {t1, t2}, true)) {                                    \
      auto v = doubles(sc);                                                                               \
      return tern(KOP, self, t1, &t2, v.data(), 0.0, self);                                               \
    }                                                                                                     \
    at::native::foreach_tensor_##name##_scalarlist_slow_(self, t1, t2, sc);                              \
  }                                                                                                       \
  std::vector<Tensor> name##_scalarlist(TensorList self, TensorList t1, TensorList t2, ScalarList sc) {   \
    at::native::check_foreach_api_restrictions(self, t1, t2, sc);                                         \
    if (!real_scalars(sc, self.size()) || !fast(self, {t1, t2}, false))                                   \
      return at::native::foreach_tensor_##name##_scalarlist_slow(self, t1, t2, sc);                      \
    auto v = doubles(sc);                                                                                 \
    auto out = empty_like_all(self);                                                                      \
    tern(KOP, self, t1, &t2, v.data(), 0.0, out);                                                         \
    return out;                                                                                           \
  }
KILN_FOREACH_ADDC(addcmul, KILN_TERNARY_ADDCMUL)
KILN_FOREACH_ADDC(addcdiv, KILN_TERNARY_ADDCDIV)
#undef KILN_FOREACH_ADDC

// ---- sqrt -----------------------------------------------------------------------------------

void sqrt_(TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  if (!fast(self, {}, true)) return at::native::foreach_tensor_sqrt_slow_(self);
  Descs a(self);
  KILN_CHECK(kiln_kernel_foreach_unary(KILN_UNARY_SQRT, static_cast<int>(self.size()), a.ptr(), a.ptr()));
}
std::vector<Tensor> sqrt(TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  if (!fast(self, {}, false)) return at::native::foreach_tensor_sqrt_slow(self);
  auto out = empty_like_all(self);
  Descs a(self), o(out);
  KILN_CHECK(kiln_kernel_foreach_unary(KILN_UNARY_SQRT, static_cast<int>(self.size()), a.ptr(), o.ptr()));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
// The .Scalar and .ScalarList overloads (in place and not), and the .List ones.
#define KILN_REG_SCALARS(name)                                     \
  m.impl("_foreach_" #name "_.Scalar", name##_scalar_);            \
  m.impl("_foreach_" #name ".Scalar", name##_scalar);              \
  m.impl("_foreach_" #name "_.ScalarList", name##_scalarlist_);    \
  m.impl("_foreach_" #name ".ScalarList", name##_scalarlist);
#define KILN_REG_LIST(name)                                        \
  m.impl("_foreach_" #name "_.List", name##_list_);                \
  m.impl("_foreach_" #name ".List", name##_list);
  KILN_REG_SCALARS(add) KILN_REG_LIST(add)
  KILN_REG_SCALARS(sub) KILN_REG_LIST(sub)
  KILN_REG_SCALARS(mul) KILN_REG_LIST(mul)
  KILN_REG_SCALARS(div) KILN_REG_LIST(div)
  KILN_REG_SCALARS(lerp) KILN_REG_LIST(lerp)
  KILN_REG_SCALARS(addcmul)
  KILN_REG_SCALARS(addcdiv)
#undef KILN_REG_SCALARS
#undef KILN_REG_LIST
  m.impl("_foreach_sqrt_", sqrt_);
  m.impl("_foreach_sqrt", sqrt);
}

}  // namespace torch_kiln
