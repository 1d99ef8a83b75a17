/* SPDX-License-Identifier: Apache-2.0 */
/* layout.c - strided layouts of values: views become windows (root, offset, strides). */
#include <string.h>

#include "graph/graph_internal.h"
#include "runtime/checked.h"

int gx_view_strides(const int64_t* shape, const int64_t* strides, int ndim,
                    const int64_t* new_shape, int new_ndim, int64_t* new_strides) {
  /* A port of ATen's computeStride (TensorUtils.cpp). */
  if (ndim == 0) {
    for (int i = 0; i < new_ndim; i++) new_strides[i] = 1;
    return 1;
  }
  int64_t numel = gx_numel(shape, ndim);
  if (numel == 0) {
    if (ndim == new_ndim && !memcmp(shape, new_shape, sizeof(int64_t) * (size_t)ndim)) {
      memcpy(new_strides, strides, sizeof(int64_t) * (size_t)ndim);
    } else {
      gx_contig_strides(new_shape, new_ndim, new_strides);
    }
    return 1;
  }
  int view_d = new_ndim - 1;
  int64_t chunk_base_stride = strides[ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1, chunk_stride;
  /* the shapes hold <= 2^48 elements; a stride product that overflows is not a view */
  for (int tensor_d = ndim - 1; tensor_d >= 0; tensor_d--) {
    if (!kiln_mul_i64(tensor_numel, shape[tensor_d], &tensor_numel)) return 0;
    if (tensor_d > 0 && shape[tensor_d - 1] != 1 &&
        !kiln_mul_i64(tensor_numel, chunk_base_stride, &chunk_stride))
      return 0;
    if (tensor_d == 0 || (shape[tensor_d - 1] != 1 && strides[tensor_d - 1] != chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        if (!kiln_mul_i64(view_numel, chunk_base_stride, &new_strides[view_d]) ||
            !kiln_mul_i64(view_numel, new_shape[view_d], &view_numel))
          return 0;
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

int gx_layout_value(kiln_graph_t* g, int vid) {
  gx_value* v = &g->values[vid];
  const gx_node* n = &g->nodes[v->node];
  v->has_layout = 0;
  if (!gx_is_view(n->op)) {
    v->root = vid;
    v->offset = 0;
    gx_contig_strides(v->shape, v->ndim, v->strides);
    v->has_layout = 1;
    return 1;
  }
  const gx_value* x = &g->values[n->in[0]];
  if (!x->has_layout) return 0;
  int64_t st[KILN_MAX_DIMS];
  int64_t off = x->offset;
  switch (n->op) {
    case GX_OP_PERMUTE:
      for (int i = 0; i < v->ndim; i++) st[i] = x->strides[n->i[i]];
      break;
    case GX_OP_EXPAND: {
      int lead = v->ndim - x->ndim;
      for (int i = 0; i < v->ndim; i++) {
        if (i < lead) st[i] = 0;
        else if (x->shape[i - lead] == 1 && v->shape[i] != 1) st[i] = 0;
        else st[i] = x->strides[i - lead];
      }
      break;
    }
    case GX_OP_SLICE: {
      int d = (int)n->i[0];
      memcpy(st, x->strides, sizeof(int64_t) * (size_t)x->ndim);
      /* a window inside x's: start * stride and stride * step stay within the root's extent
       * (numel <= 2^48) whenever the result has two or more elements along d */
      if (v->shape[d] > 0 && !kiln_muladd_i64(n->i[1], x->strides[d], off, &off)) return 0;
      st[d] = x->strides[d];
      if (v->shape[d] > 1 && !kiln_mul_i64(x->strides[d], n->i[3], &st[d])) return 0;
      break;
    }
    case GX_OP_RESHAPE:
      if (!gx_view_strides(x->shape, x->strides, x->ndim, v->shape, v->ndim, st)) return 0;
      break;
    default: return 0;
  }
  v->root = x->root;
  v->offset = off;
  memcpy(v->strides, st, sizeof(int64_t) * (size_t)v->ndim);
  v->has_layout = 1;
  return 1;
}
