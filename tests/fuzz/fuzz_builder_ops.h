/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_builder_ops.h - the byte encoding fuzz_builder.c decodes (gen_corpus.c writes it).
 *
 *   u16 compile flags (little-endian, KILN_COMPILE_* bits), then records until the input ends:
 *   u8 opcode (FB_* below, modulo FB_COUNT) and its operands, each read as:
 *     V    a value: u8 b, 0xff = -1 (absent), else the (b % n)-th value created so far
 *     D    a dtype: u8, kiln_dtype_t (out-of-range values stay invalid)
 *     S    a shape: u8 ndim (0..8 kept, larger ones taken modulo 10), ndim dims of u8 each:
 *          0xff = -1, else b % 32
 *     B    u8;  I  an i8 widened;  W  a u16 (i16 widened);  F  i8 / 4.0
 *   Missing bytes at the end read as 0. Each builder call's result values are appended to the
 *   value list (n <= FB_MAX_VALUES, later results are dropped). Without an FB_OUTPUT record the
 *   last value created is the output.
 */
#ifndef KILN_FUZZ_BUILDER_OPS_H
#define KILN_FUZZ_BUILDER_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/graph.h"

#define FB_MAX_VALUES 64
#define FB_NONE 0xff

enum {
  FB_INPUT = 0,       /* D S */
  FB_CONSTANT,        /* D S B fill: bits 7..6 mode (0 random, 1 all (fill&63), 2 arange,
                         3 raw bytes from the input); random ints lie in [0, (fill & 63) + 1) */
  FB_SCALAR,          /* F D */
  FB_FULL,            /* D S F */
  FB_UNARY,           /* B op, V, D */
  FB_UNARY_EX,        /* B op, V, F alpha, F scale, F input_scale, F threshold, F min, F max,
                         B has_min/has_max bits, D */
  FB_BINARY,          /* B op, V, V, F alpha, D */
  FB_BINARY_EX,       /* B op, V, V, F alpha, D compute (0xff = -1), D */
  FB_TERNARY,         /* B op, V, V, V, F scalar, D */
  FB_WHERE,           /* V V V */
  FB_CAST,            /* V D */
  FB_COPY,            /* V self, V src */
  FB_REDUCE,          /* B op, V, B mask, B keepdim, F param, D */
  FB_REDUCE_INDEX,    /* B op, V, I dim (-128 = all dims), B keepdim */
  FB_SCAN,            /* B op, V, I dim, D */
  FB_MATMUL,          /* V V */
  FB_ADDMM,           /* V bias, V, V, F beta, F alpha */
  FB_RESHAPE,         /* V S */
  FB_PERMUTE,         /* V, rank(V) x I */
  FB_EXPAND,          /* V S */
  FB_SLICE,           /* V I dim, I start, I end (127 = INT64_MAX), B step */
  FB_SELECT,          /* V I dim, I index */
  FB_CONTIGUOUS,      /* V */
  FB_CAT,             /* B n (1 + n % 4), n x V, I dim */
  FB_SOFTMAX,         /* V I dim, B log, D (0xff = -1) */
  FB_SOFTMAX_BW,      /* V grad, V out, I dim, B log, D (0xff = -1) */
  FB_LAYER_NORM,      /* V x, V w, V b, B nn, F eps */
  FB_LAYER_NORM_BW,   /* V g, V x, V mean, V rstd, V w, B nn, B mask */
  FB_RMS_NORM,        /* V x, V w, B nn, F eps */
  FB_RMS_NORM_BW,     /* V g, V x, V rstd, V w, B nn, B mask */
  FB_EMBEDDING,       /* V weight, V indices */
  FB_EMBEDDING_BW,    /* V g, V indices, B num_weights, I padding_idx, B scale */
  FB_NLL_LOSS,        /* V lp, V target, V weight, B reduction, I ignore_index */
  FB_NLL_LOSS_BW,     /* V g, V lp, V target, V weight, B reduction, I ignore, V total_weight */
  FB_SDPA,            /* V q, V k, V v, V mask, B causal, F scale (0 = NaN, the default) */
  FB_SDPA_BW,         /* V g, V q, V k, V v, V out, V lse, V mask, B causal, F scale, B mask */
  FB_CONV2D,          /* V x, V w, V bias, 2B stride, 2B padding, 2B dilation, B groups */
  FB_CONV2D_BW,       /* V g, V x, V w, 2B stride, 2B padding, 2B dilation, B groups, B mask */
  FB_MAX_POOL,        /* V x, 2B kernel, 2B stride (0 0 = NULL), 2B padding, 2B dilation,
                         B ceil, B want_indices */
  FB_MAX_POOL_BW,     /* V g, V indices, B in_h, B in_w */
  FB_AVG_POOL,        /* V x, 2B kernel, 2B stride, 2B padding, B ceil, B count_pad, B div */
  FB_AVG_POOL_BW,     /* V g, B in_h, B in_w, 2B kernel, 2B stride, 2B padding, B ceil,
                         B count_pad, B div */
  FB_ADAPTIVE_POOL,   /* V x, B out_h, B out_w */
  FB_ADAPTIVE_POOL_BW, /* V g, B in_h, B in_w */
  FB_GATHER,          /* V x, I dim, V index */
  FB_INDEX_SELECT,    /* V x, I dim, V index */
  FB_SCATTER,         /* V self, I dim, V index, V src, F value, B reduce, B include_self */
  FB_INDEX,           /* V self, B n (n % 5), n x V */
  FB_INDEX_PUT,       /* V self, B n (n % 5), n x V, V values, B accumulate */
  FB_OUTPUT,          /* V */
  FB_SCALAR_I64,      /* W value, D */
  FB_COUNT
};

/* Decodes `data` into a new graph (the caller owns it; NULL if creation failed) with its outputs
 * set; *flags gets the compile flags, *n_failed the number of builder calls that were rejected
 * (each one leaves the graph unchanged, which is checked). fuzz_builder.c. */
kiln_graph_t* fb_decode(const uint8_t* data, size_t size, int* flags, int* n_failed);

#endif /* KILN_FUZZ_BUILDER_OPS_H */
