/* SPDX-License-Identifier: Apache-2.0 */
/* infer.c - gx_add: validation and shape/dtype inference for every op (builder and loader).
 *
 * Attribute slots (gx_spec / gx_node):
 *   INPUT        sub = input index, dtype, i[0..n) shape
 *   CONST        sub = 1 for a wrapped scalar, dtype, i[0..n) shape, data
 *   UNARY        sub op, dtype out, dtype2 compute, f[0..6) alpha scale input_scale threshold
 *                min max, i[0] has_min, i[1] has_max
 *   BINARY       sub op, dtype out, dtype2 compute, f[0] alpha
 *   TERNARY      sub op, dtype out, dtype2 compute, f[0] scalar
 *   CAST         dtype out
 *   REDUCE       sub op, dtype out, dtype2 compute, i[0] mask, i[1] keepdim, f[0] param
 *   REDUCE_INDEX sub op, i[0] dim (or KILN_REDUCE_INDEX_ALL_DIMS), i[1] keepdim
 *   SCAN         sub 0 sum / 1 prod, dtype out, i[0] dim
 *   ADDMM        f[0] beta, f[1] alpha; in bias a b
 *   RESHAPE / EXPAND  i[0..n) shape;  PERMUTE i[0..n) perm;  SLICE i[0..4) dim start end step
 *   CAT          i[0] dim
 *   SOFTMAX(_BW) i[0] dim, i[1] log, dtype out
 *   LAYER_NORM   i[0] normalized_ndim, f[0] eps; in x w b
 *   LAYER_NORM_BW i[0] normalized_ndim, i[1] output mask; in g x mean rstd w
 *   RMS_NORM     i[0] normalized_ndim, f[0] eps; in x w
 *   RMS_NORM_BW  i[0] normalized_ndim, i[1] output mask; in g x rstd w
 *   EMBEDDING_BW i[0] num_weights, i[1] padding_idx, i[2] scale_grad_by_freq; in g idx
 *   NLL_LOSS     i[0] reduction, i[1] ignore_index; in lp target w
 *   NLL_LOSS_BW  i[0] reduction, i[1] ignore_index; in g lp target w total_weight
 *   SDPA         i[0] is_causal, f[0] scale; in q k v mask
 *   SDPA_BW      i[0] is_causal, i[1] output mask, f[0] scale; in g q k v out lse mask
 *   CONV         i[0..2) stride, i[2..4) padding, i[4..6) dilation, i[6] groups; in x w bias
 *   CONV_BW      CONV's i[0..7), i[7] output mask; in g x w
 *   MAX_POOL     i[0..2) kernel, [2..4) stride, [4..6) padding, [6..8) dilation, i[8] ceil; in x
 *   MAX_POOL_BW  i[0..2) input H, W; in g indices
 *   AVG_POOL     i[0..2) kernel, [2..4) stride, [4..6) padding, i[6] ceil, i[7]
 *                count_include_pad, i[8] divisor_override; in x
 *   AVG_POOL_BW  AVG_POOL's i[0..9), i[9..11) input H, W; in g
 *   ADAPTIVE_POOL    i[0..2) output H, W; in x
 *   ADAPTIVE_POOL_BW i[0..2) input H, W; in g
 *   GATHER / INDEX_SELECT  i[0] dim; in x index
 *   SCATTER      sub reduce, i[0] dim, i[1] include_self, f[0] value; in self index src(-1)
 *   INDEX        in self idx...(-1 = full slice)
 *   INDEX_PUT    i[0] accumulate; in self values idx...(-1 = full slice)
 *   ARANGE       i[0] length; sub 1 (integer dtypes): i[1] start, i[2] step; sub 0: f[0], f[1]
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/conv.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/index.h"
#include "kiln/kernels/nn.h"
#include "kiln/kernels/reduce.h"
#include "runtime/checked.h"

#define BADARG(...) kiln_error(KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

typedef struct {
  int n_out;
  unsigned present;
  int dtype[GX_MAX_OUT];
  int ndim[GX_MAX_OUT];
  int64_t shape[GX_MAX_OUT][KILN_MAX_DIMS];
} outs_t;

static void set_out(outs_t* o, int k, int dtype, int ndim, const int64_t* shape) {
  o->present |= 1u << k;
  o->dtype[k] = dtype;
  o->ndim[k] = ndim;
  for (int i = 0; i < ndim; i++) o->shape[k][i] = shape[i];
}

int gx_op_n_out(int op) {
  switch (op) {
    case GX_OP_LAYER_NORM:
    case GX_OP_LAYER_NORM_BW:
    case GX_OP_SDPA_BW:
    case GX_OP_CONV_BW: return 3;
    case GX_OP_MAX_POOL:
    case GX_OP_REDUCE_INDEX:
    case GX_OP_RMS_NORM:
    case GX_OP_RMS_NORM_BW:
    case GX_OP_NLL_LOSS:
    case GX_OP_SDPA: return 2;
    default: return 1;
  }
}

/* Re-raises the kernel's error with the builder's name in front. */
static kiln_status_t reraise(kiln_status_t st, const char* what) {
  char msg[400];
  snprintf(msg, sizeof msg, "%s", kiln_status_message());
  return kiln_error((kiln_status_code_t)st, "%s: %s", what, msg);
}

/* A 1-element tensor of dtype dt holding 1 (rank 1) over `buf` (8 bytes). */
static kiln_tensor_t one(int dt, void* buf) {
  kiln_tensor_t t;
  int64_t s = 1;
  kiln_tensor_init_contiguous(&t, buf, (kiln_dtype_t)dt, 1, &s);
  kiln_kernel_fill(&t, 1.0);
  return t;
}

/* Runs the pointwise kernel once on 1-element tensors: the kernel's own rules decide whether
 * (op, dtypes, params) is defined. */
static kiln_status_t dry_pointwise(const gx_spec* s, const kiln_graph_t* g, int compute,
                                   const char* what) {
  _Alignas(8) char b0[8], b1[8], b2[8], bo[8];
  kiln_tensor_t t[3], out = one(s->dtype, bo);
  char* bufs[3] = {b0, b1, b2};
  for (int k = 0; k < s->n_in && k < 3; k++)
    if (s->in[k] >= 0) t[k] = one(g->values[s->in[k]].dtype, bufs[k]);
  kiln_status_t st = KILN_OK;
  if (s->op == GX_OP_UNARY) {
    kiln_unary_params_t p = {s->f[0], s->f[1], s->f[2], s->f[3], s->f[4], s->f[5],
                             (int)s->i[0], (int)s->i[1]};
    st = kiln_kernel_unary_ex((kiln_unary_op_t)s->sub, &t[0], &p, (kiln_dtype_t)compute, &out);
  } else if (s->op == GX_OP_BINARY) {
    st = kiln_kernel_binary((kiln_binary_op_t)s->sub, &t[0], &t[1], s->f[0],
                            (kiln_dtype_t)compute, &out);
  } else if (s->op == GX_OP_TERNARY) {
    st = kiln_kernel_ternary((kiln_ternary_op_t)s->sub, &t[0], s->in[1] >= 0 ? &t[1] : NULL,
                             s->in[2] >= 0 ? &t[2] : NULL, s->f[0], (kiln_dtype_t)compute, &out);
  }
  if (st != KILN_OK) return reraise(st, what);
  return KILN_OK;
}

static int norm_dim(int64_t dim, int ndim, int* out) {
  int n = ndim ? ndim : 1;
  if (dim < -n || dim >= n) return 0;
  *out = (int)(dim < 0 ? dim + n : dim);
  return 1;
}

static int is_float(int dt) { return dt >= 0 && kiln_dtype_is_float((kiln_dtype_t)dt); }
static int is_half(int dt) { return dt == KILN_DTYPE_F16 || dt == KILN_DTYPE_BF16; }
static int is_index(int dt) { return dt == KILN_DTYPE_I32 || dt == KILN_DTYPE_I64; }

static int binary_bool_result(int op) {
  return (op >= KILN_BINARY_EQ && op <= KILN_BINARY_LOGICAL_XOR);
}
static int unary_bool_result(int op) {
  return op == KILN_UNARY_LOGICAL_NOT || op == KILN_UNARY_ISNAN || op == KILN_UNARY_ISINF ||
         op == KILN_UNARY_ISFINITE;
}

#define V(k) (&g->values[s->in[k]])
#define SH(buf, v) gx_fmt_shape(buf, (v)->shape, (v)->ndim)

/* A contiguous descriptor of v's shape and dtype without data (for the kernels' shape checks). */
static kiln_tensor_t desc(const gx_value* v) {
  kiln_tensor_t t;
  kiln_tensor_init_contiguous(&t, NULL, (kiln_dtype_t)v->dtype, v->ndim, v->shape);
  return t;
}

/* desc() for a shape-only query that rejects NULL data: a dummy address, never dereferenced. */
static kiln_tensor_t desc_nonnull(const gx_value* v) {
  static _Alignas(64) char dummy[64];
  kiln_tensor_t t = desc(v);
  t.data = dummy;
  return t;
}

/* Reduced-dims prefix shape [:-n] + [1]*n. */
static void stat_shape(const gx_value* x, int nn, int64_t* shape) {
  for (int i = 0; i < x->ndim; i++) shape[i] = i < x->ndim - nn ? x->shape[i] : 1;
}

static kiln_status_t infer(kiln_graph_t* g, gx_spec* s, outs_t* o) {
  const char* what = s->op < GX_OP_BUILD_COUNT ? gx_op_name(s->op) : "?";
  char nm[64];
  snprintf(nm, sizeof nm, "kiln_graph_%s", what);
  what = nm;
  char b1[200], b2[200], b3[200];
  int64_t shp[KILN_MAX_DIMS];
  int nd;
  o->n_out = gx_op_n_out(s->op);
  o->present = 0;

  switch (s->op) {
    case GX_OP_INPUT:
    case GX_OP_CONST: {
      if (!gx_valid_dtype(s->dtype)) return BADARG("%s: bad dtype %d", what, s->dtype);
      if (s->n_i < 0 || s->n_i > KILN_MAX_DIMS)
        return BADARG("%s: ndim %d outside [0, %d]", what, s->n_i, KILN_MAX_DIMS);
      int64_t numel;
      for (int i = 0; i < s->n_i; i++)
        if (s->i[i] < 0) return BADARG("%s: negative dim %lld", what, (long long)s->i[i]);
      if (!kiln_numel_capped(s->i, s->n_i, KILN_NUMEL_MAX, &numel))
        return BADARG("%s: shape %s is too large (limit 2^48 elements)", what,
                      gx_fmt_shape(b1, s->i, s->n_i));
      if (s->op == GX_OP_CONST) {
        int64_t nbytes;
        if (!kiln_nbytes(s->i, s->n_i, kiln_dtype_size((kiln_dtype_t)s->dtype), &nbytes) ||
            (uint64_t)nbytes != (uint64_t)s->data_bytes)
          return BADARG("%s: %zu data bytes for %lld elements of %s", what, s->data_bytes,
                        (long long)numel, kiln_dtype_name((kiln_dtype_t)s->dtype));
        if (numel > 0 && !s->data) return BADARG("%s: NULL data", what);
        if (s->sub != 0 && (s->sub != 1 || s->n_i != 0))
          return BADARG("%s: bad wrapped flag", what);
      }
      set_out(o, 0, s->dtype, s->n_i, s->i);
      return KILN_OK;
    }
    case GX_OP_UNARY: {
      if (s->sub < 0 || s->sub >= KILN_UNARY_COUNT) return BADARG("%s: bad op %d", what, s->sub);
      if (!gx_valid_dtype(s->dtype)) return BADARG("%s: bad out dtype %d", what, s->dtype);
      int c = s->dtype2 >= 0 ? s->dtype2 : (unary_bool_result(s->sub) ? V(0)->dtype : s->dtype);
      if (!gx_valid_dtype(c)) return BADARG("%s: bad compute dtype %d", what, c);
      s->dtype2 = c;
      KILN_RETURN_IF_ERROR(dry_pointwise(s, g, c, what));
      set_out(o, 0, s->dtype, V(0)->ndim, V(0)->shape);
      return KILN_OK;
    }
    case GX_OP_BINARY: {
      if (s->sub < 0 || s->sub >= KILN_BINARY_COUNT) return BADARG("%s: bad op %d", what, s->sub);
      if (!gx_valid_dtype(s->dtype)) return BADARG("%s: bad out dtype %d", what, s->dtype);
      if (!gx_broadcast(V(0)->shape, V(0)->ndim, V(1)->shape, V(1)->ndim, shp, &nd))
        return BADARG("%s: shapes %s and %s do not broadcast", what, SH(b1, V(0)), SH(b2, V(1)));
      int c = s->dtype2 >= 0 ? s->dtype2
                             : (binary_bool_result(s->sub) ? gx_result_type(g, s->in, 2) : s->dtype);
      if (!gx_valid_dtype(c)) return BADARG("%s: bad compute dtype %d", what, c);
      s->dtype2 = c;
      KILN_RETURN_IF_ERROR(dry_pointwise(s, g, c, what));
      set_out(o, 0, s->dtype, nd, shp);
      return KILN_OK;
    }
    case GX_OP_TERNARY: {
      if (s->sub < 0 || s->sub >= KILN_TERNARY_COUNT)
        return BADARG("%s: bad op %d", what, s->sub);
      if (!gx_valid_dtype(s->dtype)) return BADARG("%s: bad out dtype %d", what, s->dtype);
      if (s->sub != KILN_TERNARY_CLAMP_TENSOR && (s->in[1] < 0 || s->in[2] < 0))
        return BADARG("%s: missing operand", what);
      nd = V(0)->ndim;
      memcpy(shp, V(0)->shape, sizeof(int64_t) * (size_t)nd);
      for (int k = 1; k < 3; k++) {
        if (s->in[k] < 0) continue;
        int64_t acc[KILN_MAX_DIMS]; /* gx_broadcast must not write the shape it reads */
        memcpy(acc, shp, sizeof(int64_t) * (size_t)nd);
        if (!gx_broadcast(acc, nd, V(k)->shape, V(k)->ndim, shp, &nd))
          return BADARG("%s: shape %s does not broadcast with %s", what, SH(b1, V(k)),
                        gx_fmt_shape(b2, acc, nd));
      }
      int c = s->dtype2 >= 0 ? s->dtype2 : s->dtype;
      if (!gx_valid_dtype(c)) return BADARG("%s: bad compute dtype %d", what, c);
      s->dtype2 = c;
      KILN_RETURN_IF_ERROR(dry_pointwise(s, g, c, what));
      set_out(o, 0, s->dtype, nd, shp);
      return KILN_OK;
    }
    case GX_OP_CAST:
    case GX_OP_CONTIGUOUS: {
      if (s->op == GX_OP_CONTIGUOUS) s->dtype = V(0)->dtype;
      if (!gx_valid_dtype(s->dtype)) return BADARG("%s: bad dtype %d", what, s->dtype);
      set_out(o, 0, s->dtype, V(0)->ndim, V(0)->shape);
      return KILN_OK;
    }
    case GX_OP_REDUCE: {
      const gx_value* x = V(0);
      if (s->sub < 0 || s->sub >= KILN_REDUCE_COUNT) return BADARG("%s: bad op %d", what, s->sub);
      if (!gx_valid_dtype(s->dtype)) return BADARG("%s: bad out dtype %d", what, s->dtype);
      uint64_t mask = (uint64_t)s->i[0];
      if (x->ndim == 0 && mask == 1) mask = 0; /* dim 0 / -1 of a scalar, as torch allows */
      if (x->ndim < 32 && (mask >> x->ndim) != 0)
        return BADARG("%s: dim mask 0x%llx has a bit at or above rank %d", what,
                      (unsigned long long)mask, x->ndim);
      if (mask == 0) mask = (1u << x->ndim) - 1;
      s->i[0] = (int64_t)mask;
      s->i[1] = s->i[1] != 0;
      int c = s->dtype2 >= 0 ? s->dtype2 : (s->dtype == KILN_DTYPE_BOOL ? x->dtype : s->dtype);
      if (!gx_valid_dtype(c)) return BADARG("%s: bad compute dtype %d", what, c);
      s->dtype2 = c;
      int64_t rn = 1;
      nd = 0;
      for (int i = 0; i < x->ndim; i++) {
        if (mask & (1u << i)) {
          rn = rn && x->shape[i]; /* only whether the reduced set is empty matters */
          if (s->i[1]) shp[nd++] = 1;
        } else {
          shp[nd++] = x->shape[i];
        }
      }
      if (rn == 0 && (s->sub == KILN_REDUCE_AMAX || s->sub == KILN_REDUCE_AMIN))
        return BADARG("%s: %s over an empty set", what, gx_sub_name(s->op, s->sub));
      /* dtype legality from the kernel itself */
      _Alignas(8) char bx[8], bo[8];
      kiln_tensor_t tx = one(x->dtype, bx), to = one(s->dtype, bo);
      kiln_reduce_params_t p = {s->f[0], s->f[0]};
      kiln_status_t st = kiln_kernel_reduce((kiln_reduce_op_t)s->sub, &tx, 1u, &p,
                                            (kiln_dtype_t)c, &to);
      if (st != KILN_OK) return reraise(st, what);
      set_out(o, 0, s->dtype, nd, shp);
      return KILN_OK;
    }
    case GX_OP_REDUCE_INDEX: {
      const gx_value* x = V(0);
      if (s->sub != KILN_REDUCE_INDEX_MAX && s->sub != KILN_REDUCE_INDEX_MIN)
        return BADARG("%s: bad op %d", what, s->sub);
      s->i[1] = s->i[1] != 0;
      nd = 0;
      if (s->i[0] == KILN_REDUCE_INDEX_ALL_DIMS) {
        if (x->numel == 0) return BADARG("%s: empty input", what);
        if (s->i[1])
          for (int i = 0; i < x->ndim; i++) shp[nd++] = 1;
      } else {
        int d;
        if (!norm_dim(s->i[0], x->ndim, &d))
          return BADARG("%s: dim %lld out of range for rank %d", what, (long long)s->i[0],
                        x->ndim);
        s->i[0] = d;
        if (x->ndim && x->shape[d] == 0) return BADARG("%s: empty reduced dim", what);
        for (int i = 0; i < x->ndim; i++) {
          if (i != d) shp[nd++] = x->shape[i];
          else if (s->i[1]) shp[nd++] = 1;
        }
      }
      set_out(o, 0, x->dtype, nd, shp);
      set_out(o, 1, KILN_DTYPE_I64, nd, shp);
      return KILN_OK;
    }
    case GX_OP_SCAN: {
      const gx_value* x = V(0);
      int d;
      if (s->sub != 0 && s->sub != 1) return BADARG("%s: bad op %d", what, s->sub);
      if (!gx_valid_dtype(s->dtype)) return BADARG("%s: bad out dtype %d", what, s->dtype);
      if (!norm_dim(s->i[0], x->ndim, &d)) return BADARG("%s: bad dim", what);
      s->i[0] = d;
      set_out(o, 0, s->dtype, x->ndim, x->shape);
      return KILN_OK;
    }
    case GX_OP_MATMUL:
    case GX_OP_ADDMM: {
      int ia = s->op == GX_OP_ADDMM ? 1 : 0;
      const gx_value* a = V(ia);
      const gx_value* b = V(ia + 1);
      if (a->dtype != b->dtype)
        return BADARG("%s: dtypes %s and %s differ", what, kiln_dtype_name(a->dtype),
                      kiln_dtype_name(b->dtype));
      if (!is_float(a->dtype))
        return kiln_error(KILN_ERROR_UNIMPLEMENTED, "%s: %s matmul is not supported", what,
                          kiln_dtype_name(a->dtype));
      if (a->ndim < 1 || b->ndim < 1)
        return BADARG("%s: operands must have rank >= 1 (%s, %s)", what, SH(b1, a), SH(b2, b));
      int64_t ka = a->shape[a->ndim - 1];
      int64_t kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
      if (ka != kb)
        return BADARG("%s: shapes %s and %s cannot be multiplied", what, SH(b1, a), SH(b2, b));
      int na = a->ndim >= 2 ? a->ndim - 2 : 0, nb = b->ndim >= 2 ? b->ndim - 2 : 0;
      if (!gx_broadcast(a->shape, na, b->shape, nb, shp, &nd))
        return BADARG("%s: batch dims of %s and %s do not broadcast", what, SH(b1, a),
                      SH(b2, b));
      if (a->ndim >= 2) shp[nd++] = a->shape[a->ndim - 2];
      if (b->ndim >= 2) shp[nd++] = b->shape[b->ndim - 1];
      if (nd > KILN_MAX_DIMS) return BADARG("%s: result rank too large", what);
      if (s->op == GX_OP_ADDMM && s->in[0] >= 0) {
        const gx_value* c = V(0);
        if (c->dtype != a->dtype) return BADARG("%s: bias dtype differs", what);
        if (!gx_broadcasts_to(c->shape, c->ndim, shp, nd))
          return BADARG("%s: bias %s does not broadcast to %s", what, SH(b1, c),
                        gx_fmt_shape(b2, shp, nd));
      }
      set_out(o, 0, a->dtype, nd, shp);
      return KILN_OK;
    }
    case GX_OP_RESHAPE: {
      const gx_value* x = V(0);
      if (s->n_i < 0 || s->n_i > KILN_MAX_DIMS) return BADARG("%s: bad ndim %d", what, s->n_i);
      int infer_at = -1;
      int64_t known, dims[KILN_MAX_DIMS];
      for (int i = 0; i < s->n_i; i++) {
        dims[i] = s->i[i];
        if (s->i[i] == -1) {
          if (infer_at >= 0) return BADARG("%s: more than one -1", what);
          infer_at = i;
          dims[i] = 1;
        } else if (s->i[i] < 0) {
          return BADARG("%s: bad dim %lld", what, (long long)s->i[i]);
        }
      }
      if (!kiln_numel_capped(dims, s->n_i, KILN_NUMEL_MAX, &known))
        return BADARG("%s: cannot reshape %s into %s (limit 2^48 elements)", what, SH(b1, x),
                      gx_fmt_shape(b2, s->i, s->n_i));
      if (infer_at >= 0) {
        if (known == 0 || x->numel % known != 0)
          return BADARG("%s: cannot infer -1 reshaping %s", what, SH(b1, x));
        s->i[infer_at] = x->numel / known;
        known = x->numel;
      }
      if (known != x->numel)
        return BADARG("%s: cannot reshape %s into %s", what, SH(b1, x),
                      gx_fmt_shape(b2, s->i, s->n_i));
      set_out(o, 0, x->dtype, s->n_i, s->i);
      return KILN_OK;
    }
    case GX_OP_PERMUTE: {
      const gx_value* x = V(0);
      if (s->n_i != x->ndim) return BADARG("%s: perm needs %d entries", what, x->ndim);
      int seen = 0;
      for (int i = 0; i < x->ndim; i++) {
        int d;
        if (!norm_dim(s->i[i], x->ndim, &d) || (seen & (1 << d)))
          return BADARG("%s: not a permutation of rank %d", what, x->ndim);
        seen |= 1 << d;
        s->i[i] = d;
        shp[i] = x->shape[d];
      }
      set_out(o, 0, x->dtype, x->ndim, shp);
      return KILN_OK;
    }
    case GX_OP_EXPAND: {
      const gx_value* x = V(0);
      if (s->n_i < x->ndim || s->n_i > KILN_MAX_DIMS)
        return BADARG("%s: cannot expand %s to rank %d", what, SH(b1, x), s->n_i);
      int lead = s->n_i - x->ndim;
      for (int i = 0; i < s->n_i; i++) {
        int64_t want = s->i[i];
        if (i < lead) {
          if (want < 0) return BADARG("%s: bad new dim %lld", what, (long long)want);
          continue;
        }
        int64_t have = x->shape[i - lead];
        if (want == -1) want = have;
        if (want != have && have != 1)
          return BADARG("%s: cannot expand %s to %s", what, SH(b1, x),
                        gx_fmt_shape(b2, s->i, s->n_i));
        if (want < 0) return BADARG("%s: bad dim", what);
        s->i[i] = want;
      }
      set_out(o, 0, x->dtype, s->n_i, s->i);
      return KILN_OK;
    }
    case GX_OP_SLICE: {
      const gx_value* x = V(0);
      int d;
      if (x->ndim == 0) return BADARG("%s: cannot slice a rank-0 value", what);
      if (!norm_dim(s->i[0], x->ndim, &d)) return BADARG("%s: bad dim", what);
      if (s->i[3] < 1) return BADARG("%s: step must be >= 1", what);
      int64_t n = x->shape[d], st = s->i[1], en = s->i[2];
      if (st < 0) st = st < -n ? 0 : st + n;
      if (en < 0) en = en < -n ? 0 : en + n;
      if (st > n) st = n;
      if (en > n) en = n;
      if (en < st) en = st;
      s->i[0] = d;
      s->i[1] = st;
      s->i[2] = en;
      memcpy(shp, x->shape, sizeof(int64_t) * (size_t)x->ndim);
      shp[d] = en == st ? 0 : 1 + (en - st - 1) / s->i[3];
      /* the same window with step 1 (keeps stride * step small); end is cut to match, so the
       * normalized node gives this shape again when a saved program is loaded */
      if (shp[d] <= 1) {
        s->i[3] = 1;
        s->i[2] = st + shp[d];
      }
      set_out(o, 0, x->dtype, x->ndim, shp);
      return KILN_OK;
    }
    case GX_OP_CAT: {
      if (s->n_in < 1) return BADARG("%s: needs at least one input", what);
      const gx_value* x = V(0);
      int d;
      if (x->ndim == 0) return BADARG("%s: rank-0 inputs", what);
      if (!norm_dim(s->i[0], x->ndim, &d)) return BADARG("%s: bad dim", what);
      s->i[0] = d;
      memcpy(shp, x->shape, sizeof(int64_t) * (size_t)x->ndim);
      int dt = x->dtype;
      for (int k = 1; k < s->n_in; k++) {
        const gx_value* y = V(k);
        if (y->ndim != x->ndim) return BADARG("%s: ranks differ (%s, %s)", what, SH(b1, x), SH(b2, y));
        for (int i = 0; i < x->ndim; i++)
          if (i != d && y->shape[i] != x->shape[i])
            return BADARG("%s: shapes %s and %s differ outside dim %d", what, SH(b1, x),
                          SH(b2, y), d);
        if (!kiln_add_i64(shp[d], y->shape[d], &shp[d]) || shp[d] > KILN_NUMEL_MAX)
          return BADARG("%s: the sizes along dim %d add up to more than 2^48", what, d);
        dt = gx_promote(dt, y->dtype);
      }
      set_out(o, 0, dt, x->ndim, shp);
      return KILN_OK;
    }
    case GX_OP_SOFTMAX:
    case GX_OP_SOFTMAX_BW: {
      const gx_value* x = V(0);
      int d;
      if (!is_float(x->dtype)) return BADARG("%s: needs a floating input", what);
      if (s->op == GX_OP_SOFTMAX_BW) {
        const gx_value* y = V(1);
        if (!is_float(y->dtype) || y->ndim != x->ndim ||
            memcmp(y->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
          return BADARG("%s: grad %s and output %s differ", what, SH(b1, x), SH(b2, y));
      }
      if (s->dtype < 0) s->dtype = x->dtype;
      if (!is_float(s->dtype)) return BADARG("%s: needs a floating out dtype", what);
      if (!norm_dim(s->i[0], x->ndim, &d)) return BADARG("%s: bad dim", what);
      s->i[0] = d;
      s->i[1] = s->i[1] != 0;
      set_out(o, 0, s->dtype, x->ndim, x->shape);
      return KILN_OK;
    }
    case GX_OP_LAYER_NORM:
    case GX_OP_RMS_NORM: {
      const gx_value* x = V(0);
      int nn = (int)s->i[0];
      if (!is_float(x->dtype)) return BADARG("%s: needs a floating input", what);
      if (nn < 1 || nn > x->ndim) return BADARG("%s: normalized_ndim %d for rank %d", what, nn, x->ndim);
      int nparam = s->op == GX_OP_LAYER_NORM ? 2 : 1;
      int wdt = -1;
      for (int k = 1; k <= nparam; k++) {
        if (s->in[k] < 0) continue;
        const gx_value* w = V(k);
        if (!is_float(w->dtype) || w->ndim != nn ||
            memcmp(w->shape, x->shape + x->ndim - nn, sizeof(int64_t) * (size_t)nn))
          return BADARG("%s: weight/bias %s does not match %s", what, SH(b1, w), SH(b2, x));
        if (k == 1) wdt = w->dtype;
      }
      int sdt = x->dtype;
      if (is_half(x->dtype) && (wdt == KILN_DTYPE_F32 || s->op == GX_OP_RMS_NORM))
        sdt = KILN_DTYPE_F32;
      stat_shape(x, nn, shp);
      set_out(o, 0, x->dtype, x->ndim, x->shape);
      if (s->op == GX_OP_LAYER_NORM) {
        set_out(o, 1, sdt, x->ndim, shp);
        set_out(o, 2, sdt, x->ndim, shp);
      } else {
        set_out(o, 1, sdt, x->ndim, shp);
      }
      return KILN_OK;
    }
    case GX_OP_LAYER_NORM_BW:
    case GX_OP_RMS_NORM_BW: {
      int ln = s->op == GX_OP_LAYER_NORM_BW;
      const gx_value* gr = V(0);
      const gx_value* x = V(1);
      int iw = ln ? 4 : 3;
      int nn = (int)s->i[0];
      if (!is_float(x->dtype) || !is_float(gr->dtype)) return BADARG("%s: needs floating inputs", what);
      if (nn < 1 || nn > x->ndim) return BADARG("%s: bad normalized_ndim %d", what, nn);
      if (gr->ndim != x->ndim || memcmp(gr->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
        return BADARG("%s: grad %s and input %s differ", what, SH(b1, gr), SH(b2, x));
      int64_t rows = gx_numel(x->shape, x->ndim - nn);
      for (int k = 2; k < iw; k++)
        if (V(k)->numel != rows || !is_float(V(k)->dtype))
          return BADARG("%s: statistics %s do not match %lld rows", what, SH(b1, V(k)),
                        (long long)rows);
      int wdt = x->dtype;
      if (s->in[iw] >= 0) {
        const gx_value* w = V(iw);
        if (!is_float(w->dtype) || w->ndim != nn ||
            memcmp(w->shape, x->shape + x->ndim - nn, sizeof(int64_t) * (size_t)nn))
          return BADARG("%s: weight %s does not match %s", what, SH(b1, w), SH(b2, x));
        wdt = w->dtype;
      }
      int mask = (int)s->i[1] & (ln ? 7 : 3);
      s->i[1] = mask;
      if (mask & 1) set_out(o, 0, x->dtype, x->ndim, x->shape);
      if (mask & 2) set_out(o, 1, wdt, nn, x->shape + x->ndim - nn);
      if (ln && (mask & 4)) set_out(o, 2, wdt, nn, x->shape + x->ndim - nn);
      return KILN_OK;
    }
    case GX_OP_EMBEDDING: {
      const gx_value* w = V(0);
      const gx_value* ix = V(1);
      if (w->ndim != 2) return BADARG("%s: weight %s must be [V, D]", what, SH(b1, w));
      if (!is_index(ix->dtype)) return BADARG("%s: indices must be i32 or i64", what);
      if (ix->ndim + 1 > KILN_MAX_DIMS) return BADARG("%s: result rank too large", what);
      memcpy(shp, ix->shape, sizeof(int64_t) * (size_t)ix->ndim);
      shp[ix->ndim] = w->shape[1];
      set_out(o, 0, w->dtype, ix->ndim + 1, shp);
      return KILN_OK;
    }
    case GX_OP_EMBEDDING_BW: {
      const gx_value* gr = V(0);
      const gx_value* ix = V(1);
      if (!is_index(ix->dtype)) return BADARG("%s: indices must be i32 or i64", what);
      if (!is_float(gr->dtype)) return BADARG("%s: grad must be floating", what);
      if (gr->ndim != ix->ndim + 1 ||
          memcmp(gr->shape, ix->shape, sizeof(int64_t) * (size_t)ix->ndim))
        return BADARG("%s: grad %s does not match indices %s", what, SH(b1, gr), SH(b2, ix));
      if (s->i[0] < 0) return BADARG("%s: negative num_weights", what);
      s->i[2] = s->i[2] != 0;
      shp[0] = s->i[0];
      shp[1] = gr->shape[gr->ndim - 1];
      set_out(o, 0, gr->dtype, 2, shp);
      return KILN_OK;
    }
    case GX_OP_NLL_LOSS:
    case GX_OP_NLL_LOSS_BW: {
      int bw = s->op == GX_OP_NLL_LOSS_BW;
      const gx_value* lp = V(bw);
      const gx_value* t = V(bw + 1);
      if (!is_float(lp->dtype)) return BADARG("%s: log_probs must be floating", what);
      if (!is_index(t->dtype)) return BADARG("%s: target must be i32 or i64", what);
      if (s->i[0] < 0 || s->i[0] > 2) return BADARG("%s: bad reduction %lld", what, (long long)s->i[0]);
      if (lp->ndim < 1) return BADARG("%s: log_probs must have rank >= 1", what);
      int64_t C = lp->ndim == 1 ? lp->shape[0] : lp->shape[1];
      int ok = 1;
      if (lp->ndim == 1) {
        ok = t->ndim == 0;
      } else {
        ok = t->ndim == lp->ndim - 1 && t->shape[0] == lp->shape[0];
        for (int i = 2; ok && i < lp->ndim; i++) ok = t->shape[i - 1] == lp->shape[i];
      }
      if (!ok) return BADARG("%s: target %s does not match log_probs %s", what, SH(b1, t), SH(b2, lp));
      if (s->in[bw + 2] >= 0) {
        const gx_value* w = V(bw + 2);
        if (w->ndim != 1 || w->shape[0] != C || !is_float(w->dtype))
          return BADARG("%s: weight %s must be [%lld]", what, SH(b1, w), (long long)C);
      }
      if (!bw) {
        if (s->i[0] == KILN_REDUCTION_NONE) set_out(o, 0, lp->dtype, t->ndim, t->shape);
        else set_out(o, 0, lp->dtype, 0, shp);
        set_out(o, 1, lp->dtype, 0, shp);
      } else {
        const gx_value* gr = V(0);
        const gx_value* tw = V(4);
        if (!is_float(gr->dtype) || !is_float(tw->dtype) || tw->numel != 1)
          return BADARG("%s: bad grad_out or total_weight", what);
        if (s->i[0] == KILN_REDUCTION_NONE
                ? (gr->ndim != t->ndim ||
                   memcmp(gr->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim))
                : gr->numel != 1)
          return BADARG("%s: grad_out %s does not match target %s", what, SH(b1, gr), SH(b2, t));
        set_out(o, 0, lp->dtype, lp->ndim, lp->shape);
      }
      return KILN_OK;
    }
    case GX_OP_SDPA:
    case GX_OP_SDPA_BW: {
      int bw = s->op == GX_OP_SDPA_BW;
      const gx_value* q = V(bw + 0);
      const gx_value* k = V(bw + 1);
      const gx_value* v = V(bw + 2);
      if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return BADARG("%s: q, k, v must be rank 4 (%s, %s, %s)", what, SH(b1, q), SH(b2, k), SH(b3, v));
      if (!is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return BADARG("%s: q, k, v must share a floating dtype", what);
      if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] || v->shape[1] != k->shape[1] ||
          k->shape[1] == 0 || q->shape[1] % k->shape[1] != 0 || k->shape[3] != q->shape[3] ||
          v->shape[2] != k->shape[2])
        return BADARG("%s: incompatible q %s, k %s, v %s", what, SH(b1, q), SH(b2, k), SH(b3, v));
      int im = bw ? 6 : 3;
      if (s->in[im] >= 0) {
        const gx_value* m = V(im);
        int64_t full[4] = {q->shape[0], q->shape[1], q->shape[2], k->shape[2]};
        if (!gx_broadcasts_to(m->shape, m->ndim, full, 4))
          return BADARG("%s: mask %s does not broadcast to %s", what, SH(b1, m),
                        gx_fmt_shape(b2, full, 4));
        if (m->dtype != KILN_DTYPE_BOOL && !is_float(m->dtype))
          return BADARG("%s: mask must be bool or floating", what);
      }
      s->i[0] = s->i[0] != 0;
      int64_t os[4] = {q->shape[0], q->shape[1], q->shape[2], v->shape[3]};
      if (!bw) {
        set_out(o, 0, q->dtype, 4, os);
        set_out(o, 1, q->dtype == KILN_DTYPE_F64 ? KILN_DTYPE_F64 : KILN_DTYPE_F32, 3, os);
      } else {
        const gx_value* gr = V(0);
        const gx_value* out = V(4);
        const gx_value* lse = V(5);
        if (gr->ndim != 4 || memcmp(gr->shape, os, sizeof os) || out->ndim != 4 ||
            memcmp(out->shape, os, sizeof os) || lse->ndim != 3 || memcmp(lse->shape, os, 3 * sizeof(int64_t)))
          return BADARG("%s: grad_out / out / logsumexp shapes do not match", what);
        int mask = (int)s->i[1] & 7;
        s->i[1] = mask;
        if (mask & 1) set_out(o, 0, q->dtype, 4, q->shape);
        if (mask & 2) set_out(o, 1, k->dtype, 4, k->shape);
        if (mask & 4) set_out(o, 2, v->dtype, 4, v->shape);
      }
      return KILN_OK;
    }
    case GX_OP_CONV:
    case GX_OP_CONV_BW: {
      int bw = s->op == GX_OP_CONV_BW;
      const gx_value* x = V(bw);
      const gx_value* w = V(bw + 1);
      kiln_tensor_t tx = desc(x), tw = desc(w), tb;
      if (!bw && s->in[2] >= 0) tb = desc(V(2));
      int64_t os[4];
      kiln_status_t st = kiln_conv2d_output_shape(&tx, &tw, !bw && s->in[2] >= 0 ? &tb : NULL,
                                                  s->i, s->i + 2, s->i + 4, s->i[6], os);
      if (st != KILN_OK) return reraise(st, what);
      if (!bw) {
        set_out(o, 0, x->dtype, x->ndim, os);
        return KILN_OK;
      }
      const gx_value* gr = V(0);
      if (gr->dtype != x->dtype || gr->ndim != x->ndim ||
          memcmp(gr->shape, os, sizeof(int64_t) * (size_t)x->ndim))
        return BADARG("%s: grad_out %s (%s), expected %s (%s)", what, SH(b1, gr),
                      kiln_dtype_name(gr->dtype), gx_fmt_shape(b2, os, x->ndim),
                      kiln_dtype_name(x->dtype));
      int mask = (int)s->i[7] & 7;
      if (!mask) return BADARG("%s: empty output mask", what);
      s->i[7] = mask;
      if (mask & 1) set_out(o, 0, x->dtype, x->ndim, x->shape);
      if (mask & 2) set_out(o, 1, w->dtype, w->ndim, w->shape);
      if (mask & 4) set_out(o, 2, w->dtype, 1, w->shape);
      return KILN_OK;
    }
    case GX_OP_MAX_POOL:
    case GX_OP_AVG_POOL: {
      const gx_value* x = V(0);
      kiln_tensor_t tx = desc(x);
      int mx = s->op == GX_OP_MAX_POOL;
      if (!mx && s->i[8] < 0) return BADARG("%s: negative divisor_override", what);
      kiln_status_t st = kiln_pool2d_output_shape(&tx, s->i, s->i + 2, s->i + 4,
                                                  mx ? s->i + 6 : NULL, (int)s->i[mx ? 8 : 6], shp);
      if (st != KILN_OK) return reraise(st, what);
      set_out(o, 0, x->dtype, x->ndim, shp);
      if (mx) set_out(o, 1, KILN_DTYPE_I64, x->ndim, shp);
      return KILN_OK;
    }
    case GX_OP_MAX_POOL_BW:
    case GX_OP_AVG_POOL_BW:
    case GX_OP_ADAPTIVE_POOL_BW: {
      const gx_value* gr = V(0);
      int ih = s->op == GX_OP_AVG_POOL_BW ? 9 : 0;
      if (!is_float(gr->dtype) || (gr->ndim != 3 && gr->ndim != 4))
        return BADARG("%s: grad_out %s must be a floating [N, C, H, W] or [C, H, W]", what,
                      SH(b1, gr));
      if (s->i[ih] < 1 || s->i[ih + 1] < 1)
        return BADARG("%s: bad input size %lldx%lld", what, (long long)s->i[ih],
                      (long long)s->i[ih + 1]);
      int64_t t;
      if (s->op == GX_OP_ADAPTIVE_POOL_BW &&
          (!kiln_muladd_i64(gr->shape[gr->ndim - 2], s->i[ih], gr->shape[gr->ndim - 2], &t) ||
           !kiln_muladd_i64(gr->shape[gr->ndim - 1], s->i[ih + 1], gr->shape[gr->ndim - 1], &t)))
        return BADARG("%s: grad_out %s times input size %lldx%lld overflows int64", what,
                      SH(b1, gr), (long long)s->i[ih], (long long)s->i[ih + 1]);
      memcpy(shp, gr->shape, sizeof(int64_t) * (size_t)gr->ndim);
      shp[gr->ndim - 2] = s->i[ih];
      shp[gr->ndim - 1] = s->i[ih + 1];
      if (s->op == GX_OP_MAX_POOL_BW) {
        const gx_value* ix = V(1);
        if (ix->dtype != KILN_DTYPE_I64 || ix->ndim != gr->ndim ||
            memcmp(ix->shape, gr->shape, sizeof(int64_t) * (size_t)gr->ndim))
          return BADARG("%s: indices %s (%s) must be i64 of grad_out's shape %s", what,
                        SH(b1, ix), kiln_dtype_name(ix->dtype), SH(b2, gr));
      } else if (s->op == GX_OP_AVG_POOL_BW) {
        if (s->i[8] < 0) return BADARG("%s: negative divisor_override", what);
        kiln_tensor_t tx;
        kiln_status_t sx = kiln_tensor_init_contiguous(&tx, NULL, (kiln_dtype_t)gr->dtype,
                                                       gr->ndim, shp);
        if (sx != KILN_OK) return reraise(sx, what);
        int64_t os[KILN_MAX_DIMS];
        kiln_status_t st = kiln_pool2d_output_shape(&tx, s->i, s->i + 2, s->i + 4, NULL,
                                                    (int)s->i[6], os);
        if (st != KILN_OK) return reraise(st, what);
        if (memcmp(os, gr->shape, sizeof(int64_t) * (size_t)gr->ndim))
          return BADARG("%s: grad_out %s, expected %s for input %s", what, SH(b1, gr),
                        gx_fmt_shape(b2, os, gr->ndim), gx_fmt_shape(b3, shp, gr->ndim));
      }
      set_out(o, 0, gr->dtype, gr->ndim, shp);
      return KILN_OK;
    }
    case GX_OP_ARANGE: {
      if (!gx_valid_dtype(s->dtype) || s->dtype == KILN_DTYPE_BOOL)
        return BADARG("%s: bad dtype %d", what, s->dtype);
      if (s->n_i != 3 || s->i[0] < 0 || s->sub < 0 || s->sub > 1)
        return BADARG("%s: bad length or mode", what);
      if (s->sub != !kiln_dtype_is_float((kiln_dtype_t)s->dtype))
        return BADARG("%s: integer mode for a %s result", what, kiln_dtype_name((kiln_dtype_t)s->dtype));
      if (!s->sub && (!isfinite(s->f[0]) || !isfinite(s->f[1])))
        return BADARG("%s: start and step must be finite", what);
      int64_t last;
      if (s->sub && s->i[0] > 0 &&
          !kiln_muladd_i64(s->i[0] - 1, s->i[2], s->i[1], &last))
        return BADARG("%s: start + (n - 1) * step overflows int64", what);
      shp[0] = s->i[0];
      set_out(o, 0, s->dtype, 1, shp);
      return KILN_OK;
    }
    case GX_OP_GATHER:
    case GX_OP_INDEX_SELECT:
    case GX_OP_SCATTER: {
      const gx_value* x = V(0);
      const gx_value* ix = V(1);
      int d;
      if (!norm_dim(s->i[0], x->ndim, &d))
        return BADARG("%s: dim %lld out of range for rank %d", what, (long long)s->i[0], x->ndim);
      s->i[0] = d;
      if (s->op == GX_OP_INDEX_SELECT) {
        if (!is_index(ix->dtype) || ix->ndim > 1)
          return BADARG("%s: index %s (%s) must be a 0-d or 1-d i32/i64 tensor", what, SH(b1, ix),
                        kiln_dtype_name(ix->dtype));
        memcpy(shp, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        if (x->ndim > 0) shp[d] = ix->numel;
        else if (ix->numel != 1) return BADARG("%s: %lld indices into a 0-d tensor", what, (long long)ix->numel);
        set_out(o, 0, x->dtype, x->ndim, shp);
        return KILN_OK;
      }
      if (ix->dtype != KILN_DTYPE_I64 || (ix->ndim != x->ndim && !(ix->ndim <= 1 && x->ndim <= 1)))
        return BADARG("%s: index %s (%s) must be i64 of rank %d", what, SH(b1, ix),
                      kiln_dtype_name(ix->dtype), x->ndim);
      for (int k = 0; k < ix->ndim && k < x->ndim; k++)
        if (k != d && ix->shape[k] > x->shape[k])
          return BADARG("%s: index %s is larger than %s outside dim %d", what, SH(b1, ix),
                        SH(b2, x), d);
      if (s->op == GX_OP_GATHER) {
        set_out(o, 0, x->dtype, ix->ndim, ix->shape);
        return KILN_OK;
      }
      if (s->sub < 0 || s->sub >= KILN_SCATTER_COUNT) return BADARG("%s: bad reduce %d", what, s->sub);
      if (s->in[2] >= 0) {
        const gx_value* src = V(2);
        if (src->dtype != x->dtype || src->ndim != ix->ndim)
          return BADARG("%s: src %s (%s) must have self's dtype %s and index's rank", what,
                        SH(b1, src), kiln_dtype_name(src->dtype), kiln_dtype_name(x->dtype));
        for (int k = 0; k < ix->ndim; k++)
          if (ix->shape[k] > src->shape[k])
            return BADARG("%s: index %s is larger than src %s", what, SH(b1, ix), SH(b2, src));
      }
      if (s->sub == KILN_SCATTER_MEAN && x->dtype == KILN_DTYPE_BOOL)
        return BADARG("%s: mean of bool", what);
      set_out(o, 0, x->dtype, x->ndim, x->shape);
      return KILN_OK;
    }
    case GX_OP_INDEX:
    case GX_OP_INDEX_PUT: {
      const int put = s->op == GX_OP_INDEX_PUT;
      const gx_value* x = V(0);
      const int ni = s->n_in - 1 - put;
      if (ni < 0 || ni > x->ndim)
        return BADARG("%s: %d indices for a rank-%d tensor", what, ni, x->ndim);
      kiln_tensor_t tx = desc_nonnull(x), ti[KILN_MAX_DIMS];
      const kiln_tensor_t* tp[KILN_MAX_DIMS];
      for (int k = 0; k < ni; k++) {
        const int v = s->in[1 + put + k];
        tp[k] = NULL;
        if (v < 0) continue;
        if (!is_index(g->values[v].dtype))
          return BADARG("%s: index %d is %s, not i32/i64", what, k,
                        kiln_dtype_name((kiln_dtype_t)g->values[v].dtype));
        ti[k] = desc_nonnull(&g->values[v]);
        tp[k] = &ti[k];
      }
      int32_t rnd;
      kiln_status_t st = kiln_kernel_index_shape(&tx, tp, ni, &rnd, shp);
      if (st != KILN_OK) return reraise(st, what);
      if (!put) {
        set_out(o, 0, x->dtype, rnd, shp);
        return KILN_OK;
      }
      const gx_value* vals = V(1);
      if (vals->dtype != x->dtype)
        return BADARG("%s: values dtype %s differs from self's %s", what,
                      kiln_dtype_name(vals->dtype), kiln_dtype_name(x->dtype));
      if (!gx_broadcasts_to(vals->shape, vals->ndim, shp, rnd))
        return BADARG("%s: shape mismatch: values %s do not broadcast to the indexed shape %s",
                      what, SH(b1, vals), gx_fmt_shape(b2, shp, rnd));
      s->i[0] = s->i[0] != 0;
      set_out(o, 0, x->dtype, x->ndim, x->shape);
      return KILN_OK;
    }
    case GX_OP_ADAPTIVE_POOL: {
      const gx_value* x = V(0);
      if (!is_float(x->dtype) || (x->ndim != 3 && x->ndim != 4))
        return BADARG("%s: x %s must be a floating [N, C, H, W] or [C, H, W]", what, SH(b1, x));
      if (s->i[0] < 1 || s->i[1] < 1)
        return BADARG("%s: bad output size %lldx%lld", what, (long long)s->i[0],
                      (long long)s->i[1]);
      if (x->shape[x->ndim - 2] < 1 || x->shape[x->ndim - 1] < 1)
        return BADARG("%s: empty spatial dims in %s", what, SH(b1, x));
      int64_t t;
      if (!kiln_muladd_i64(s->i[0], x->shape[x->ndim - 2], s->i[0], &t) ||
          !kiln_muladd_i64(s->i[1], x->shape[x->ndim - 1], s->i[1], &t))
        return BADARG("%s: output size %lldx%lld times input %s overflows int64", what,
                      (long long)s->i[0], (long long)s->i[1], SH(b1, x));
      memcpy(shp, x->shape, sizeof(int64_t) * (size_t)x->ndim);
      shp[x->ndim - 2] = s->i[0];
      shp[x->ndim - 1] = s->i[1];
      set_out(o, 0, x->dtype, x->ndim, shp);
      return KILN_OK;
    }
    default: return BADARG("kiln graph: unknown op %d", s->op);
  }
}

kiln_status_t gx_add(kiln_graph_t* g, const gx_spec* spec, int* out_vids) {
  KILN_RETURN_IF_ERROR(gx_validate_spec(g, spec));
  gx_spec s = *spec;
  outs_t o;
  memset(&o, 0, sizeof o);
  KILN_RETURN_IF_ERROR(infer(g, &s, &o));
  for (int k = 0; k < o.n_out; k++) {
    if (!(o.present & (1u << k))) continue;
    int64_t numel;
    if (!kiln_numel_capped(o.shape[k], o.ndim[k], KILN_NUMEL_MAX, &numel)) {
      char b[200];
      return BADARG("kiln_graph_%s: result shape %s is negative or too large (limit 2^48 elements)",
                    gx_op_name(s.op), gx_fmt_shape(b, o.shape[k], o.ndim[k]));
    }
  }
  if (s.op == GX_OP_INPUT)
    KILN_RETURN_IF_ERROR(gx_grow(&g->alloc, (void**)&g->inputs, &g->cap_inputs, g->n_inputs + 1,
                                 sizeof(int)));
  void* data = NULL;
  if (s.op == GX_OP_CONST && s.borrow) {
    data = (void*)s.data; /* the caller keeps it alive (model files mapped in place) */
  } else if (s.op == GX_OP_CONST) {
    data = gx_alloc(&g->alloc, s.data_bytes);
    if (!data) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_graph_constant: out of memory");
    if (s.data_bytes) memcpy(data, s.data, s.data_bytes);
  }
  int id;
  kiln_status_t st = gx_new_node(g, s.op, s.n_in, s.in, o.n_out, o.present, &id);
  if (st != KILN_OK) {
    if (!s.borrow) gx_free(&g->alloc, data);
    return st;
  }
  gx_node* n = &g->nodes[id];
  n->sub = s.sub;
  n->dtype = s.dtype;
  n->dtype2 = s.dtype2;
  n->n_i = s.n_i;
  memcpy(n->i, s.i, sizeof n->i);
  memcpy(n->f, s.f, sizeof n->f);
  if (data) {
    n->data = data;
    n->data_bytes = s.data_bytes;
    n->owns_data = !s.borrow;
  }
  if (s.op == GX_OP_INPUT) {
    n->sub = g->n_inputs;
    g->inputs[g->n_inputs++] = n->out[0];
  }
  for (int k = 0; k < o.n_out; k++) {
    if (out_vids) out_vids[k] = n->out[k];
    if (n->out[k] < 0) continue;
    gx_value* v = &g->values[n->out[k]];
    v->dtype = o.dtype[k];
    v->ndim = o.ndim[k];
    memcpy(v->shape, o.shape[k], sizeof(int64_t) * (size_t)o.ndim[k]);
    v->numel = gx_numel(v->shape, v->ndim);
    v->wrapped = s.op == GX_OP_CONST && s.sub == 1;
    v->root = n->out[k];
  }
  return KILN_OK;
}
