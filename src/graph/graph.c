/* SPDX-License-Identifier: Apache-2.0 */
/* graph.c - graph objects, node/value storage, type promotion and shape helpers. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/reduce.h"
#include "runtime/checked.h"

/* ---- memory ---------------------------------------------------------------------------------- */

void* gx_alloc(const kiln_allocator_t* a, size_t bytes) {
  return kiln_allocator_alloc(a, bytes ? bytes : 1, GX_ALIGN);
}

void* gx_calloc(const kiln_allocator_t* a, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void* p = gx_alloc(a, n * size);
  if (p) memset(p, 0, n * size > 0 ? n * size : 1);
  return p;
}

void gx_free(const kiln_allocator_t* a, void* p) { kiln_allocator_free(a, p); }

kiln_status_t gx_grow(const kiln_allocator_t* a, void** arr, int* cap, int need, size_t size) {
  if (need <= *cap) return KILN_OK;
  if (need > (1 << 28)) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: too many items");
  int ncap = *cap ? *cap : 16;
  while (ncap < need) ncap *= 2;
  void* p = gx_alloc(a, (size_t)ncap * size);
  if (!p) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory");
  if (*arr && *cap) memcpy(p, *arr, (size_t)*cap * size);
  gx_free(a, *arr);
  *arr = p;
  *cap = ncap;
  return KILN_OK;
}

/* ---- graph ----------------------------------------------------------------------------------- */

kiln_status_t gx_graph_new(const kiln_allocator_t* a, kiln_graph_t** out) {
  kiln_allocator_t al = a ? *a : kiln_allocator_system();
  kiln_graph_t* g = kiln_allocator_alloc(&al, sizeof(*g), GX_ALIGN);
  if (!g) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_graph_create: out of memory");
  memset(g, 0, sizeof(*g));
  g->alloc = al;
  *out = g;
  return KILN_OK;
}

kiln_status_t kiln_graph_create_ex(const kiln_allocator_t* allocator, kiln_graph_t** out) {
  if (!out) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_graph_create: NULL out");
  *out = NULL;
  return gx_graph_new(allocator, out);
}

kiln_status_t kiln_graph_create(kiln_graph_t** out) { return kiln_graph_create_ex(NULL, out); }

void kiln_graph_destroy(kiln_graph_t* g) {
  if (!g) return;
  kiln_allocator_t a = g->alloc;
  for (int i = 0; i < g->n_nodes; i++) {
    gx_free(&a, g->nodes[i].in);
    if (g->nodes[i].owns_data) gx_free(&a, g->nodes[i].data);
  }
  gx_free(&a, g->nodes);
  gx_free(&a, g->values);
  gx_free(&a, g->inputs);
  gx_free(&a, g->outputs);
  gx_free(&a, g);
}

kiln_status_t gx_graph_copy(const kiln_graph_t* src, int share_data, kiln_graph_t** out) {
  kiln_graph_t* g;
  KILN_RETURN_IF_ERROR(gx_graph_new(&src->alloc, &g));
  kiln_status_t st = KILN_OK;
  if ((st = gx_grow(&g->alloc, (void**)&g->nodes, &g->cap_nodes, src->n_nodes, sizeof(gx_node))) ||
      (st = gx_grow(&g->alloc, (void**)&g->values, &g->cap_values, src->n_values,
                    sizeof(gx_value))) ||
      (st = gx_grow(&g->alloc, (void**)&g->inputs, &g->cap_inputs, src->n_inputs, sizeof(int))) ||
      (st = gx_grow(&g->alloc, (void**)&g->outputs, &g->cap_outputs, src->n_outputs,
                    sizeof(int)))) {
    kiln_graph_destroy(g);
    return st;
  }
  if (src->n_values) memcpy(g->values, src->values, sizeof(gx_value) * (size_t)src->n_values);
  g->n_values = src->n_values;
  if (src->n_inputs) memcpy(g->inputs, src->inputs, sizeof(int) * (size_t)src->n_inputs);
  g->n_inputs = src->n_inputs;
  if (src->n_outputs) memcpy(g->outputs, src->outputs, sizeof(int) * (size_t)src->n_outputs);
  g->n_outputs = src->n_outputs;
  for (int i = 0; i < src->n_nodes; i++) {
    const gx_node* s = &src->nodes[i];
    gx_node* d = &g->nodes[i];
    *d = *s;
    d->in = NULL;
    d->owns_data = 0;
    d->data = NULL;
    g->n_nodes = i + 1;
    d->in = gx_alloc(&g->alloc, sizeof(int) * (size_t)(s->n_in ? s->n_in : 1));
    if (!d->in) {
      kiln_graph_destroy(g);
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory copying a graph");
    }
    if (s->n_in) memcpy(d->in, s->in, sizeof(int) * (size_t)s->n_in);
    if (s->data) {
      if (share_data) {
        d->data = s->data;
      } else {
        d->data = gx_alloc(&g->alloc, s->data_bytes);
        if (!d->data) {
          kiln_graph_destroy(g);
          return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory copying data");
        }
        memcpy(d->data, s->data, s->data_bytes);
        d->owns_data = 1;
      }
    }
  }
  *out = g;
  return KILN_OK;
}

kiln_status_t gx_new_node(kiln_graph_t* g, int op, int n_in, const int* in, int n_out,
                          unsigned present, int* out_node) {
  KILN_RETURN_IF_ERROR(
      gx_grow(&g->alloc, (void**)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(gx_node)));
  KILN_RETURN_IF_ERROR(gx_grow(&g->alloc, (void**)&g->values, &g->cap_values,
                               g->n_values + n_out, sizeof(gx_value)));
  int* ins = gx_alloc(&g->alloc, sizeof(int) * (size_t)(n_in ? n_in : 1));
  if (!ins) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory");
  if (n_in) memcpy(ins, in, sizeof(int) * (size_t)n_in);
  int id = g->n_nodes++;
  gx_node* n = &g->nodes[id];
  memset(n, 0, sizeof(*n));
  n->op = op;
  n->n_in = n_in;
  n->in = ins;
  n->n_out = n_out;
  n->aux = -1;
  for (int k = 0; k < GX_MAX_OUT; k++) n->out[k] = -1;
  for (int k = 0; k < n_out; k++) {
    if (!(present & (1u << k))) continue;
    int vid = g->n_values++;
    gx_value* v = &g->values[vid];
    memset(v, 0, sizeof(*v));
    v->node = id;
    v->slot = k;
    v->root = vid;
    n->out[k] = vid;
  }
  *out_node = id;
  return KILN_OK;
}

void gx_pop_node(kiln_graph_t* g) {
  gx_node* n = &g->nodes[g->n_nodes - 1];
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] >= 0) g->n_values--;
  gx_free(&g->alloc, n->in);
  if (n->owns_data) gx_free(&g->alloc, n->data);
  g->n_nodes--;
}

int gx_valid_vid(const kiln_graph_t* g, int vid) { return vid >= 0 && vid < g->n_values; }
int gx_valid_dtype(int dtype) { return dtype >= 0 && dtype < KILN_DTYPE_COUNT; }

int64_t gx_numel(const int64_t* shape, int ndim) {
  int64_t n;
  return kiln_numel_capped(shape, ndim, INT64_MAX, &n) ? n : -1;
}

void gx_contig_strides(const int64_t* shape, int ndim, int64_t* strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    /* shapes reaching here passed gx_add's 2^48 cap; saturate rather than wrap regardless */
    if (shape[i] > 1 && !kiln_mul_i64(s, shape[i], &s)) s = INT64_MAX;
  }
}

int gx_is_identity(const gx_value* v, const gx_value* root) {
  if (v->offset != 0 || v->numel != root->numel || v->dtype != root->dtype) return 0;
  int64_t cs[KILN_MAX_DIMS];
  gx_contig_strides(v->shape, v->ndim, cs);
  for (int i = 0; i < v->ndim; i++)
    if (v->shape[i] > 1 && v->strides[i] != cs[i]) return 0;
  return 1;
}

const char* gx_fmt_shape(char* buf, const int64_t* shape, int ndim) {
  size_t o = 0;
  buf[o++] = '[';
  for (int i = 0; i < ndim; i++)
    o += (size_t)snprintf(buf + o, 200 - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
  snprintf(buf + o, 200 - o, "]");
  return buf;
}

/* ---- type promotion ------------------------------------------------------------------------- */

static int category(int dt) {
  if (dt == KILN_DTYPE_BOOL) return 0;
  return kiln_dtype_is_float((kiln_dtype_t)dt) ? 2 : 1;
}

int gx_promote(int a, int b) {
  if (a < 0) return b;
  if (b < 0 || a == b) return a;
  if (a == KILN_DTYPE_BOOL) return b;
  if (b == KILN_DTYPE_BOOL) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (a == KILN_DTYPE_F64 || b == KILN_DTYPE_F64) return KILN_DTYPE_F64;
    if (a == KILN_DTYPE_F32 || b == KILN_DTYPE_F32) return KILN_DTYPE_F32;
    return KILN_DTYPE_F32; /* f16 with bf16 */
  }
  /* integers: u8 with a signed type needs the next wider signed type */
  static const int rank[KILN_DTYPE_COUNT] = {0, 0, 0, 0, 1, 2, 3, 4, 1, 0};
  if (a == KILN_DTYPE_U8 || b == KILN_DTYPE_U8) {
    int o = a == KILN_DTYPE_U8 ? b : a;
    if (o == KILN_DTYPE_I8) return KILN_DTYPE_I16;
    return o;
  }
  return rank[a] >= rank[b] ? a : b;
}

/* torch's combine_categories(higher, lower). */
static int combine(int higher, int lower) {
  if (higher < 0) return lower;
  if (lower < 0) return higher;
  if (category(higher) == 2) return higher;
  if (higher == KILN_DTYPE_BOOL || category(lower) == 2) return gx_promote(higher, lower);
  return higher;
}

int gx_result_type(const kiln_graph_t* g, const int* vids, int n) {
  int dimr = -1, zeror = -1, wrapr = -1;
  for (int i = 0; i < n; i++) {
    if (vids[i] < 0) continue;
    const gx_value* v = &g->values[vids[i]];
    if (v->wrapped) {
      int d = v->dtype;
      if (category(d) == 2) d = KILN_DTYPE_F32; /* the default dtype */
      else if (category(d) == 1) d = KILN_DTYPE_I64;
      wrapr = gx_promote(wrapr, d);
    } else if (v->ndim == 0) {
      zeror = gx_promote(zeror, v->dtype);
    } else {
      dimr = gx_promote(dimr, v->dtype);
    }
  }
  int r = combine(dimr, combine(zeror, wrapr));
  return r < 0 ? KILN_DTYPE_F32 : r;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

int gx_broadcast(const int64_t* a, int na, const int64_t* b, int nb, int64_t* out, int* nout) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = i - (n - na), ib = i - (n - nb);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return 0;
    out[i] = da == 1 ? db : da;
  }
  *nout = n;
  return 1;
}

int gx_broadcasts_to(const int64_t* a, int na, const int64_t* b, int nb) {
  if (na > nb) return 0;
  for (int i = 0; i < na; i++) {
    int64_t da = a[na - 1 - i], db = b[nb - 1 - i];
    if (da != db && da != 1) return 0;
  }
  return 1;
}

int gx_is_pointwise(int op) {
  return op == GX_OP_UNARY || op == GX_OP_BINARY || op == GX_OP_TERNARY || op == GX_OP_CAST;
}

int gx_is_view(int op) {
  return op == GX_OP_RESHAPE || op == GX_OP_PERMUTE || op == GX_OP_EXPAND || op == GX_OP_SLICE;
}

/* ---- names ----------------------------------------------------------------------------------- */

const char* gx_op_name(int op) {
  static const char* names[] = {
      "input",       "const",         "unary",         "binary",       "ternary",
      "cast",        "reduce",        "reduce_index",  "scan",         "matmul",
      "addmm",       "reshape",       "permute",       "expand",       "slice",
      "contiguous",  "cat",           "softmax",       "softmax_bw",   "layer_norm",
      "layer_norm_bw", "rms_norm",    "rms_norm_bw",   "embedding",    "embedding_bw",
      "nll_loss",    "nll_loss_bw",   "sdpa",          "sdpa_bw",      "conv",
      "conv_bw",     "max_pool",      "max_pool_bw",   "avg_pool",     "avg_pool_bw",
      "adaptive_avg_pool", "adaptive_avg_pool_bw", "gather", "index_select", "scatter", "index", "index_put", "arange"};
  if (op >= 0 && op < GX_OP_BUILD_COUNT) return names[op];
  if (op == GX_OP_FUSED) return "fused";
  if (op == GX_OP_GEMM) return "gemm_epilogue";
  return "?";
}

const char* gx_sub_name(int op, int sub) {
  static const char* un[] = {
      "neg",   "abs",      "exp",         "expm1",     "log",        "log1p",      "log2",
      "log10", "sqrt",     "rsqrt",       "reciprocal", "sin",       "cos",        "tan",
      "asin",  "acos",     "atan",        "sinh",      "cosh",       "tanh",       "sigmoid",
      "relu",  "gelu",     "gelu_tanh",   "silu",      "mish",       "hardsigmoid", "hardswish",
      "erf",   "erfc",     "floor",       "ceil",      "round",      "trunc",      "sign",
      "square", "logical_not", "bitwise_not", "isnan", "isinf",      "isfinite",   "leaky_relu",
      "elu",   "clamp",    "pow_scalar",  "softplus"};
  static const char* bin[] = {
      "add", "sub", "mul", "div", "div_trunc", "div_floor", "remainder", "fmod", "pow",
      "maximum", "minimum", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
      "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
      "sigmoid_backward", "tanh_backward", "gelu_backward", "gelu_tanh_backward",
      "silu_backward", "threshold_backward", "leaky_relu_backward"};
  static const char* ter[] = {"where", "lerp", "addcmul", "addcdiv", "clamp_tensor"};
  static const char* red[] = {"sum", "mean", "prod", "amax", "amin", "any",
                              "all", "var", "std",  "norm", "logsumexp"};
  switch (op) {
    case GX_OP_UNARY:
      return sub >= 0 && sub < (int)(sizeof(un) / sizeof(un[0])) ? un[sub] : "?";
    case GX_OP_BINARY:
      return sub >= 0 && sub < (int)(sizeof(bin) / sizeof(bin[0])) ? bin[sub] : "?";
    case GX_OP_TERNARY:
      return sub >= 0 && sub < (int)(sizeof(ter) / sizeof(ter[0])) ? ter[sub] : "?";
    case GX_OP_REDUCE:
      return sub >= 0 && sub < (int)(sizeof(red) / sizeof(red[0])) ? red[sub] : "?";
    case GX_OP_REDUCE_INDEX: return sub == 0 ? "max" : "min";
    case GX_OP_SCAN: return sub == 0 ? "cumsum" : "cumprod";
    default: return "";
  }
}

/* ---- public queries -------------------------------------------------------------------------- */

int kiln_graph_num_values(const kiln_graph_t* g) { return g ? g->n_values : 0; }
int kiln_graph_num_inputs(const kiln_graph_t* g) { return g ? g->n_inputs : 0; }
int kiln_graph_num_outputs(const kiln_graph_t* g) { return g ? g->n_outputs : 0; }

kiln_status_t kiln_graph_value_info(const kiln_graph_t* g, int vid, int* dtype, int* ndim,
                                    int64_t* shape) {
  if (!g) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_graph_value_info: NULL graph");
  if (!gx_valid_vid(g, vid))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_graph_value_info: unknown value %d", vid);
  const gx_value* v = &g->values[vid];
  if (dtype) *dtype = v->dtype;
  if (ndim) *ndim = v->ndim;
  if (shape)
    for (int i = 0; i < v->ndim; i++) shape[i] = v->shape[i];
  return KILN_OK;
}

kiln_status_t kiln_graph_output(kiln_graph_t* g, int vid) {
  if (!g) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_graph_output: NULL graph");
  if (!gx_valid_vid(g, vid))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_graph_output: unknown value %d", vid);
  KILN_RETURN_IF_ERROR(gx_grow(&g->alloc, (void**)&g->outputs, &g->cap_outputs,
                               g->n_outputs + 1, sizeof(int)));
  g->outputs[g->n_outputs++] = vid;
  return KILN_OK;
}
