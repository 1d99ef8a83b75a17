/* SPDX-License-Identifier: Apache-2.0 */
/* exp_consts.h - the constants of the vector exp shared by every SIMD width (nn_avx2.c,
 * elementwise_avx2.c, avx512/nn_avx512.c): Cody-Waite reduction x = n ln2 + r with ln2 split
 * into a short high part and a correction, then the Cephes degree-5 polynomial
 * exp(r) ~ 1 + r + r^2 (P0 r^5 + ... + P5). One copy, so the widths compute the same bits.
 * Internal to libkiln. */
#ifndef KILN_KERNELS_EXP_CONSTS_H
#define KILN_KERNELS_EXP_CONSTS_H

#define KILN_EXP_LOG2E 1.44269504088896341f
#define KILN_EXP_LN2_HI 0.693359375f
#define KILN_EXP_LN2_LO (-2.12194440e-4f)
#define KILN_EXP_P0 1.9875691500E-4f
#define KILN_EXP_P1 1.3981999507E-3f
#define KILN_EXP_P2 8.3334519073E-3f
#define KILN_EXP_P3 4.1665795894E-2f
#define KILN_EXP_P4 1.6666665459E-1f
#define KILN_EXP_P5 5.0000001201E-1f

#endif /* KILN_KERNELS_EXP_CONSTS_H */
