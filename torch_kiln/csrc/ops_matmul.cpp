/* SPDX-License-Identifier: Apache-2.0 */
// ops_matmul.cpp - native kiln GEMM for mm, bmm, addmm, baddbmm, addmv, dot (linear and matmul
// decompose into these). Integer dtypes go to the counted CPU fallback.
#include <ATen/ops/addmm.h>
#include <ATen/ops/addmv.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/gemm.h"
}

namespace torch_kiln {
namespace {

using at::Scalar;
using at::Tensor;

bool gemm_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
  (void)op;
}

// addmm's beta/alpha as aten's CPU GEMM reads them: in the opmath dtype of out (float for f16/bf16).
double gemm_scalar(const Scalar& s, const Tensor& out) {
  at::ScalarType t = out.scalar_type();
  return checked_double(s, t == at::kHalf || t == at::kBFloat16 ? at::kFloat : t);
}

// out = beta*bias + alpha*(a @ b) through kiln_kernel_matmul_ex; out must not alias a or b.
void run_matmul(const Tensor& a, const Tensor& b, const Tensor* bias, double beta, double alpha, Tensor& out) {
  check_device(out, a);
  check_device(out, b);
  if (bias) check_device(out, *bias);
  at::assert_no_internal_overlap(out);
  if (out.numel() == 0) return;
  bool alias = out.is_alias_of(a) || out.is_alias_of(b);
  Tensor target = alias ? at::empty_like(out) : out;
  if (alias && bias && bias->is_same(out)) target.copy_(out);
  kiln_tensor_t da = describe(a), db = describe(b), dout = describe(target), dbias;
  const Tensor* bias_t = bias && bias->is_same(out) && alias ? &target : bias;
  if (bias_t) dbias = describe(*bias_t);
  KILN_CHECK(kiln_kernel_matmul_ex(&da, &db, bias_t ? &dbias : nullptr, alpha, beta, &dout));
  if (alias) out.copy_(target);
}

Tensor& mm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", self.size(0), "x",
              self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  check_same_dtype("mm", self, mat2);
  if (!gemm_dtype(self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return KILN_FALLBACK(mm_out, self, mat2, out);
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  run_matmul(self, mat2, nullptr, 0.0, 1.0, out);
  return out;
}

Tensor& bmm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  TORCH_CHECK(self.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(mat2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(self.size(0) == mat2.size(0), "batch1 and batch2 must have same number of batches, got ",
              self.size(0), " and ", mat2.size(0));
  TORCH_CHECK(self.size(2) == mat2.size(1), "Expected size for first two dimensions of batch2 tensor to be: [",
              self.size(0), ", ", self.size(2), "] but got: [", mat2.size(0), ", ", mat2.size(1), "].");
  check_same_dtype("bmm", self, mat2);
  if (!gemm_dtype(self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return KILN_FALLBACK(bmm_out, self, mat2, out);
  at::native::resize_output(out, {self.size(0), self.size(1), mat2.size(2)});
  run_matmul(self, mat2, nullptr, 0.0, 1.0, out);
  return out;
}

Tensor& addmm_out(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                  const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(mat1.dim() == 2, "mat1 must be a matrix, got ", mat1.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", mat1.size(0), "x",
              mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  check_same_dtype("addmm", mat1, mat2);
  TORCH_CHECK(at::is_expandable_to(self.sizes(), {mat1.size(0), mat2.size(1)}), "The expanded size of the bias (",
              self.sizes(), ") must match the matrix product (", mat1.size(0), "x", mat2.size(1), ")");
  if (!gemm_dtype(mat1.scalar_type()) || self.scalar_type() != mat1.scalar_type() ||
      out.scalar_type() != mat1.scalar_type())
    return KILN_FALLBACK(addmm_out, self, mat1, mat2, beta, alpha, out);
  at::native::resize_output(out, {mat1.size(0), mat2.size(1)});
  run_matmul(mat1, mat2, &self, gemm_scalar(beta, out), gemm_scalar(alpha, out), out);
  return out;
}

Tensor& baddbmm_out(const Tensor& self, const Tensor& b1, const Tensor& b2, const Scalar& beta,
                    const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(b1.dim() == 3 && b2.dim() == 3, "batch1 and batch2 must be 3D tensors");
  TORCH_CHECK(b1.size(0) == b2.size(0) && b1.size(2) == b2.size(1), "baddbmm: shapes ", b1.sizes(), " and ",
              b2.sizes(), " cannot be multiplied");
  check_same_dtype("baddbmm", b1, b2);
  std::vector<int64_t> shape = {b1.size(0), b1.size(1), b2.size(2)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), shape), "baddbmm: the bias of shape ", self.sizes(),
              " does not broadcast to ", c10::IntArrayRef(shape));
  if (!gemm_dtype(b1.scalar_type()) || self.scalar_type() != b1.scalar_type() ||
      out.scalar_type() != b1.scalar_type())
    return KILN_FALLBACK(baddbmm_out, self, b1, b2, beta, alpha, out);
  at::native::resize_output(out, shape);
  run_matmul(b1, b2, &self, gemm_scalar(beta, out), gemm_scalar(alpha, out), out);
  return out;
}

Tensor& addmv_out(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
                  const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", self.dim(), ", ",
              mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", self.size(0), "), mat (", mat.size(0),
              "x", mat.size(1), "), vec (", vec.size(0), ")");
  check_same_dtype("addmv", mat, vec);
  TORCH_CHECK(at::is_expandable_to(self.sizes(), {mat.size(0)}), "size mismatch, got input (", self.sizes(),
              "), mat (", mat.size(0), "x", mat.size(1), ")");
  if (!gemm_dtype(mat.scalar_type()) || self.scalar_type() != mat.scalar_type() ||
      out.scalar_type() != mat.scalar_type())
    return KILN_FALLBACK(addmv_out, self, mat, vec, beta, alpha, out);
  at::native::resize_output(out, {mat.size(0)});
  run_matmul(mat, vec, &self, gemm_scalar(beta, out), gemm_scalar(alpha, out), out);
  return out;
}

Tensor dot(const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
              other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(),
              "] and src [", other.numel(), "] to have the same number of elements, but got ", self.numel(),
              " and ", other.numel(), " elements respectively");
  if (!gemm_dtype(self.scalar_type())) return KILN_FALLBACK(dot, self, other);
  Tensor out = at::empty({}, self.options());
  if (self.numel() == 0) return out.zero_();
  Tensor a = self.view({1, self.numel()});
  Tensor b = other.view({other.numel(), 1}).as_strided({other.numel(), 1}, {other.stride(0), 1});
  Tensor o = out.view({1, 1});
  run_matmul(a.as_strided({1, self.numel()}, {self.numel() * self.stride(0), self.stride(0)}), b, nullptr, 0.0, 1.0, o);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.out", mm_out);
  m.impl("bmm.out", bmm_out);
  m.impl("addmm.out", addmm_out);
  m.impl("baddbmm.out", baddbmm_out);
  m.impl("addmv.out", addmv_out);
  m.impl("dot", dot);
}

}  // namespace torch_kiln
