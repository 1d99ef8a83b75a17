/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/random.h - counter-based random kernels (Philox4x32-10) on host tensors.
 *
 * State is explicit: a kiln_philox_t {seed, offset} owned by the caller (the torch generator).
 * Every value is a pure function of (seed, offset, logical element index), so results do not
 * depend on the number of threads, on how work is split, or on the output's strides.
 *
 * Counter mapping. One Philox block (4 x 32 random bits) is
 *     kiln_philox4x32_10(ctr = {lo32(offset), hi32(offset), lo32(g), hi32(g)},
 *                        key = {lo32(seed), hi32(seed)})
 * for "element group" g. Element i (row-major logical index over the output's shape) belongs to
 * group g = i / E and uses lane i % E of that block, where E is the kernel's elements per block:
 *     E = 4 (32 bits each) for f32/f16/bf16 uniform, normal and exponential, for bernoulli and
 *           for dropout masks;
 *     E = 2 (64 bits each) for f64 uniform / normal / exponential and for random_int (any dtype).
 * (randperm: draw d, d = 0 .. n-2, uses group d / 2, 64-bit lane d % 2.)
 *
 * Offset advance rule. Each call that draws uses exactly one block per group at the current
 * offset, so it advances gen->offset by exactly 1, whatever numel, dtype or thread count (also
 * for numel == 0). Because groups live in the counter's high words, successive calls never reuse
 * a counter. dropout with train == 0 draws nothing and leaves the offset unchanged. On error the
 * offset is unchanged (outputs may be partly written).
 *
 * Conventions: descriptors are borrowed; any strides; outputs must not overlap inputs except
 * where noted. Errors: INVALID_ARGUMENT (NULL descriptor/generator, bad dtype, shape mismatch,
 * out-of-range parameter). Work is split over the shared pool; small tensors run inline.
 *
 *   kiln_philox_t gen = {.seed = 42, .offset = 0};
 *   KILN_RETURN_IF_ERROR(kiln_kernel_uniform(&w, -0.1, 0.1, &gen));
 *   KILN_RETURN_IF_ERROR(kiln_kernel_dropout(&x, 0.1, 1, &y, &mask, &gen));
 */
#ifndef KILN_KERNELS_RANDOM_H
#define KILN_KERNELS_RANDOM_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_philox {
  uint64_t seed;   /* the key */
  uint64_t offset; /* advanced by 1 per drawing call (see above) */
} kiln_philox_t;

/* One Philox4x32-10 block: out = philox(ctr, key) (Salmon et al. 2011, Random123 constants). */
void kiln_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* torch uniform_(from, to): floating out, values in [from, to) after rounding the bounds to
 * out's dtype (a draw that would round up to `to` is replaced by the largest value below it).
 * u = (bits >> 8) * 2^-24 (f64: 53 bits of a 64-bit lane); value = from + u * (to - from),
 * computed in double. Needs finite from <= to. */
kiln_status_t kiln_kernel_uniform(kiln_tensor_t* out, double from, double to,
                                  kiln_philox_t* gen);

/* torch normal_(mean, std): floating out, Box-Muller in double. Lanes pair up (0,1) and (2,3)
 * for E = 4, (0,1) for E = 2: u1 in (0, 1], u2 in [0, 1), r = sqrt(-2 ln u1), the pair is
 * (r cos 2 pi u2, r sin 2 pi u2). Needs finite mean and std >= 0. */
kiln_status_t kiln_kernel_normal(kiln_tensor_t* out, double mean, double std, kiln_philox_t* gen);

/* torch exponential_(lambd): floating out, -ln(u) / lambd with u in (0, 1) (never 0 or inf
 * before rounding). Needs finite lambd > 0. */
kiln_status_t kiln_kernel_exponential(kiln_tensor_t* out, double lambd, kiln_philox_t* gen);

/* torch bernoulli_(p): out (any dtype) = 1 where u < p, else 0, u = bits * 2^-32. p in [0, 1]. */
kiln_status_t kiln_kernel_bernoulli_scalar(kiln_tensor_t* out, double p, kiln_philox_t* gen);

/* torch bernoulli_(p_tensor): like the scalar form with a per-element probability. p is any
 * floating dtype and broadcasts to out's shape (numpy rules). An element of p outside [0, 1]
 * (or NaN) gives INVALID_ARGUMENT (out is then partly written). */
kiln_status_t kiln_kernel_bernoulli_tensor(kiln_tensor_t* out, const kiln_tensor_t* p,
                                           kiln_philox_t* gen);

/* torch random_(from, to) / randint: out (any dtype but bool unless [from, to) within [0, 2))
 * = from + floor(u64 * (to - from) / 2^64), u64 one 64-bit lane (E = 2): bias <= range / 2^64.
 * Needs from < to_exclusive and every value in range representable exactly in out's dtype
 * (floats: |v| <= 2^mantissa_digits). */
kiln_status_t kiln_kernel_random_int(kiln_tensor_t* out, int64_t from, int64_t to_exclusive,
                                     kiln_philox_t* gen);

/* torch.randperm(n): out is 1-d of length n, any non-bool dtype that holds n - 1 exactly.
 * Fisher-Yates: out[k] = k, then for i = n-1 .. 1 (draw d = n-1-i) swap out[i] with
 * out[floor(u64_d * (i + 1) / 2^64)]. Runs on the calling thread. */
kiln_status_t kiln_kernel_randperm(kiln_tensor_t* out, int64_t n, kiln_philox_t* gen);

/* aten::native_dropout: with train != 0, keep = (u < 1 - p) exactly like
 * kiln_kernel_bernoulli_scalar(mask, 1 - p) at the same (seed, offset), and
 * out = (x * keep) * scale, scale = 1 / (1 - p) (0 when p == 1), computed in float (double when
 * x or out is f64) like torch: p == 1 gives x * 0 (zeros for finite x), p == 0 a copy.
 * With train == 0: out = x, mask = 1, no draw. x and out are floating with the same shape (any
 * floating dtypes); mask_out (NULL = not wanted) has that shape and any dtype (bool/u8 in torch)
 * and receives 0/1. out may alias x exactly. p in [0, 1]. */
kiln_status_t kiln_kernel_dropout(const kiln_tensor_t* x, double p, int train, kiln_tensor_t* out,
                                  kiln_tensor_t* mask_out, kiln_philox_t* gen);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_RANDOM_H */
