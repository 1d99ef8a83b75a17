/* SPDX-License-Identifier: Apache-2.0 */
// program.cpp - torch.ops.kiln.run_program: one call of a compiled kiln program (kiln/graph.h)
// on torch tensors. The per-call work KilnProgram.__call__ did in Python (input signature and
// contiguity checks, data pointers, output and workspace allocation) is a loop here; the
// compiled program itself is C. Python keeps the outputs that are not program results (views
// of inputs, zeros, constants).
#include <torch/library.h>

#include <string>
#include <vector>

#include "kiln_torch.h"
#include "tensor_desc.h"

extern "C" {
#include "kiln/graph.h"
}

namespace torch_kiln {
namespace {

std::string shape_str(const int64_t* shape, int ndim) {
  std::string s = "(";
  for (int d = 0; d < ndim; d++) s += (d ? ", " : "") + std::to_string(shape[d]) + (ndim == 1 ? "," : "");
  return s + ")";
}

// Runs the program at `exec` (a kiln_exec_t* from kiln_graph_compile) on `inputs`; returns its
// outputs, allocated on `device`. Raises RuntimeError for a wrong input count, shape or dtype
// (the program reads its inputs as compiled), and the mapped kiln error if the run fails.
// Threads may call it on one program at once: the buffer lists, outputs and workspace are per
// call, and the C run binds them in a run context of its own (kiln/graph.h).
std::vector<at::Tensor> op_run_program(int64_t exec, at::TensorList inputs, c10::Device device) {
  auto* e = reinterpret_cast<kiln_exec_t*>(exec);
  TORCH_CHECK(e != nullptr, "kiln program: NULL program");
  const int n_in = kiln_exec_num_inputs(e), n_out = kiln_exec_num_outputs(e);
  TORCH_CHECK(static_cast<int64_t>(inputs.size()) == n_in, "kiln program: ", inputs.size(),
              " inputs given, compiled for ", n_in);
  std::vector<void*> in_ptrs(static_cast<size_t>(n_in));
  std::vector<at::Tensor> keep;  // contiguous copies, alive until the run returns
  for (int i = 0; i < n_in; i++) {
    const at::Tensor& t = inputs[static_cast<size_t>(i)];
    int dtype = 0, ndim = 0;
    int64_t shape[KILN_MAX_DIMS] = {0};
    KILN_CHECK(kiln_exec_input_info(e, i, &dtype, &ndim, shape));
    bool same = t.defined() && t.dim() == ndim && t.scalar_type() == to_scalar_type(dtype);
    for (int d = 0; same && d < ndim; d++) same = t.size(d) == shape[d];
    TORCH_CHECK(same, "kiln program: input ", i, " is ",
                t.defined() ? shape_str(t.sizes().data(), static_cast<int>(t.dim())) : std::string("undefined"),
                " ", t.defined() ? c10::toString(t.scalar_type()) : "", ", compiled for ", shape_str(shape, ndim),
                " ", c10::toString(to_scalar_type(dtype)));
    TORCH_CHECK(t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1,
                "kiln program: input ", i, " is on ", t.device(), " (kiln or cpu memory expected)");
    if (t.is_contiguous()) {
      in_ptrs[static_cast<size_t>(i)] = t.data_ptr();
    } else {
      keep.push_back(t.contiguous());
      in_ptrs[static_cast<size_t>(i)] = keep.back().data_ptr();
    }
  }
  std::vector<at::Tensor> outs;
  std::vector<void*> out_ptrs(static_cast<size_t>(n_out));
  outs.reserve(static_cast<size_t>(n_out));
  const auto opts = at::TensorOptions().device(device);
  for (int k = 0; k < n_out; k++) {
    int dtype = 0, ndim = 0;
    int64_t shape[KILN_MAX_DIMS] = {0};
    KILN_CHECK(kiln_exec_output_info(e, k, &dtype, &ndim, shape));
    outs.push_back(at::empty(c10::IntArrayRef(shape, static_cast<size_t>(ndim)), opts.dtype(to_scalar_type(dtype))));
    out_ptrs[static_cast<size_t>(k)] = outs.back().data_ptr();
  }
  if (n_out == 0) return outs;
  // Intermediates live in a workspace from the device's allocator per call (back in its cache
  // when the call returns), so a program holds no memory between calls.
  const int64_t ws_bytes = kiln_exec_workspace_size(e);
  at::Tensor ws;
  void* ws_ptr = nullptr;
  if (ws_bytes > 0) {
    ws = at::empty({ws_bytes + 64}, opts.dtype(at::kByte));
    ws_ptr = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data_ptr()) + 63) & ~uintptr_t(63));
  }
  KILN_CHECK(kiln_exec_run_workspace(e, n_in, in_ptrs.data(), n_out, out_ptrs.data(), ws_ptr, ws_bytes));
  return outs;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kiln, m) {
  m.def("run_program(int exec, Tensor[] inputs, Device device) -> Tensor[]", op_run_program);
}

}  // namespace torch_kiln
