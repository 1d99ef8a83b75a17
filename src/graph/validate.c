/* SPDX-License-Identifier: Apache-2.0 */
/* validate.c - gx_validate_spec: the structural checks every node request passes before shape
 * inference reads it (op code, input count against the op's arity, input ids, attribute count).
 *
 * The builder API and the .kiln loader both add nodes through gx_add, which runs this first, so
 * infer.c may read s->in[k] for every k below the op's minimum arity, and any input that is not
 * optional for that op, without checking it again.
 */
#include "graph/graph_internal.h"

#define BADARG(...) kiln_error(KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

/* Input counts per op: [min, max] and which inputs may be -1 (bit k = input k; bit 31 = every
 * input from 31 on, which only variadic ops use). */
typedef struct {
  int min_in, max_in;
  uint32_t optional;
} gx_arity_t;

#define ANY_FROM(k) (~0u << (k)) /* inputs k, k+1, ... optional */
#define VARIADIC (1 << 20)       /* upper bound for cat's inputs */

static const gx_arity_t arity[GX_OP_BUILD_COUNT] = {
    [GX_OP_INPUT] = {0, 0, 0},
    [GX_OP_CONST] = {0, 0, 0},
    [GX_OP_UNARY] = {1, 1, 0},
    [GX_OP_BINARY] = {2, 2, 0},
    [GX_OP_TERNARY] = {3, 3, ANY_FROM(1)}, /* which ones per sub-op: infer.c */
    [GX_OP_CAST] = {1, 1, 0},
    [GX_OP_REDUCE] = {1, 1, 0},
    [GX_OP_REDUCE_INDEX] = {1, 1, 0},
    [GX_OP_SCAN] = {1, 1, 0},
    [GX_OP_MATMUL] = {2, 2, 0},
    [GX_OP_ADDMM] = {3, 3, 1u << 0},
    [GX_OP_RESHAPE] = {1, 1, 0},
    [GX_OP_PERMUTE] = {1, 1, 0},
    [GX_OP_EXPAND] = {1, 1, 0},
    [GX_OP_SLICE] = {1, 1, 0},
    [GX_OP_CONTIGUOUS] = {1, 1, 0},
    [GX_OP_CAT] = {1, VARIADIC, 0},
    [GX_OP_SOFTMAX] = {1, 1, 0},
    [GX_OP_SOFTMAX_BW] = {2, 2, 0},
    [GX_OP_LAYER_NORM] = {3, 3, ANY_FROM(1)},
    [GX_OP_LAYER_NORM_BW] = {5, 5, 1u << 4},
    [GX_OP_RMS_NORM] = {2, 2, 1u << 1},
    [GX_OP_RMS_NORM_BW] = {4, 4, 1u << 3},
    [GX_OP_EMBEDDING] = {2, 2, 0},
    [GX_OP_EMBEDDING_BW] = {2, 2, 0},
    [GX_OP_NLL_LOSS] = {3, 3, 1u << 2},
    [GX_OP_NLL_LOSS_BW] = {5, 5, 1u << 3},
    [GX_OP_SDPA] = {4, 4, 1u << 3},
    [GX_OP_SDPA_BW] = {7, 7, 1u << 6},
    [GX_OP_CONV] = {3, 3, 1u << 2},
    [GX_OP_CONV_BW] = {3, 3, 0},
    [GX_OP_MAX_POOL] = {1, 1, 0},
    [GX_OP_MAX_POOL_BW] = {2, 2, 0},
    [GX_OP_AVG_POOL] = {1, 1, 0},
    [GX_OP_AVG_POOL_BW] = {1, 1, 0},
    [GX_OP_ADAPTIVE_POOL] = {1, 1, 0},
    [GX_OP_ADAPTIVE_POOL_BW] = {1, 1, 0},
    [GX_OP_GATHER] = {2, 2, 0},
    [GX_OP_INDEX_SELECT] = {2, 2, 0},
    [GX_OP_SCATTER] = {3, 3, 1u << 2},
    [GX_OP_INDEX] = {1, 1 + KILN_MAX_DIMS, ANY_FROM(1)},         /* self, idx... */
    [GX_OP_INDEX_PUT] = {2, 2 + KILN_MAX_DIMS, ANY_FROM(2)},     /* self, values, idx... */
    [GX_OP_ARANGE] = {0, 0, 0},
};
_Static_assert(GX_OP_BUILD_COUNT == 43, "a new op needs its arity in validate.c");

static int optional_input(const gx_arity_t* a, int k) {
  return (a->optional >> (k < 31 ? k : 31)) & 1u;
}

kiln_status_t gx_validate_spec(const kiln_graph_t* g, const gx_spec* s) {
  if (!g || !s) return BADARG("kiln graph: NULL argument");
  if (s->op < 0 || s->op >= GX_OP_BUILD_COUNT) return BADARG("kiln graph: unknown op %d", s->op);
  const char* name = gx_op_name(s->op);
  const gx_arity_t* a = &arity[s->op];
  if (s->n_in < a->min_in || s->n_in > a->max_in) {
    if (a->min_in == a->max_in)
      return BADARG("kiln_graph_%s: %d inputs, expected %d", name, s->n_in, a->min_in);
    return BADARG("kiln_graph_%s: %d inputs, expected %d to %d", name, s->n_in, a->min_in,
                  a->max_in);
  }
  if (s->n_in > 0 && !s->in) return BADARG("kiln_graph_%s: NULL input list", name);
  for (int k = 0; k < s->n_in; k++) {
    if (s->in[k] == -1 && optional_input(a, k)) continue;
    if (!gx_valid_vid(g, s->in[k]))
      return BADARG("kiln_graph_%s: unknown value id %d (input %d)", name, s->in[k], k);
  }
  if (s->n_i < 0 || s->n_i > GX_MAX_I)
    return BADARG("kiln_graph_%s: %d attributes, at most %d", name, s->n_i, GX_MAX_I);
  if (gx_op_n_out(s->op) < 1 || gx_op_n_out(s->op) > GX_MAX_OUT)
    return kiln_error(KILN_ERROR_INTERNAL, "kiln_graph_%s: bad output count", name);
  return KILN_OK;
}
