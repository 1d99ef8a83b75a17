/* SPDX-License-Identifier: Apache-2.0 */
/* optim_avx2.c - AVX2+FMA bodies of the fused Adam/AdamW and SGD steps (see ../optim.c for the
 * constants k[], the flags and the numerics they reproduce). Dense f32, f16 or bf16 arrays of n
 * elements, all "vector" elements in torch's sense (optim.c runs the scalar tail); f16/bf16 are
 * widened to f32 and rounded to nearest even on store. */
#include <immintrin.h>
#include <stdint.h>

#include "kiln/dtype.h"

/* Keep in sync with optim.c. */
#define OPT_MAXIMIZE 1u
#define OPT_WD 2u
#define OPT_ADAMW 4u
#define OPT_AMSGRAD 8u
#define OPT_SCALE 16u
#define OPT_LERP_SMALL 32u
#define OPT_MOMENTUM 4u
#define OPT_FIRST 8u
#define OPT_NESTEROV 32u

void kiln_optim_adam_avx2(kiln_dtype_t dt, int64_t n, void* p, void* g, void* m, void* v,
                          void* vmax, const float* k, unsigned flags);
void kiln_optim_sgd_avx2(kiln_dtype_t dt, int64_t n, void* p, void* g, void* buf, const float* k,
                         unsigned flags);

static inline __m256 load8(const void* base, int64_t i, kiln_dtype_t dt) {
  if (dt == KILN_DTYPE_F32) return _mm256_loadu_ps((const float*)base + i);
  const __m128i h = _mm_loadu_si128((const __m128i*)((const uint16_t*)base + i));
  if (dt == KILN_DTYPE_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline void store8(void* base, int64_t i, kiln_dtype_t dt, __m256 x) {
  if (dt == KILN_DTYPE_F32) {
    _mm256_storeu_ps((float*)base + i, x);
    return;
  }
  __m128i h;
  if (dt == KILN_DTYPE_F16) {
    h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else { /* bf16: round to nearest even, NaN kept quiet */
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i qn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256i y = _mm256_blendv_epi8(r, qn, _mm256_castps_si256(nan));
    h = _mm_packus_epi32(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
  }
  _mm_storeu_si128((__m128i*)((uint16_t*)base + i), h);
}

/* Vectorized maximum: NaN if either input is NaN. */
static inline __m256 max_nan(__m256 a, __m256 b) {
  return _mm256_or_ps(_mm256_max_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

/* Adam/AdamW body; see optim.c. */
void kiln_optim_adam_avx2(kiln_dtype_t dt, int64_t n, void* p, void* g, void* m, void* v,
                          void* vmax, const float* k, unsigned fl) {
  const __m256 decay = _mm256_set1_ps(k[0]), coeff = _mm256_set1_ps(k[1]);
  const __m256 b2 = _mm256_set1_ps(k[2]), c2 = _mm256_set1_ps(k[3]);
  const __m256 bc2s = _mm256_set1_ps(k[4]), eps = _mm256_set1_ps(k[5]);
  const __m256 nss = _mm256_set1_ps(k[6]), scale = _mm256_set1_ps(k[7]);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const int small = (fl & OPT_LERP_SMALL) != 0;
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    __m256 gv = load8(g, i, dt), pv = load8(p, i, dt);
    if (fl & OPT_SCALE) {
      gv = _mm256_div_ps(gv, scale);
      store8(g, i, dt, gv);
    }
    if (fl & OPT_MAXIMIZE) gv = _mm256_xor_ps(gv, sign);
    if (fl & OPT_WD) {
      if (fl & OPT_ADAMW)
        pv = _mm256_mul_ps(pv, decay);
      else
        gv = _mm256_fmadd_ps(pv, decay, gv);
    }
    __m256 mv = load8(m, i, dt);
    mv = _mm256_fmadd_ps(coeff, _mm256_sub_ps(gv, mv), small ? mv : gv);
    __m256 vv = load8(v, i, dt);
    vv = _mm256_fmadd_ps(_mm256_mul_ps(c2, gv), gv, _mm256_mul_ps(vv, b2));
    store8(m, i, dt, mv);
    store8(v, i, dt, vv);
    __m256 s = vv;
    if (fl & OPT_AMSGRAD) {
      s = max_nan(load8(vmax, i, dt), vv);
      store8(vmax, i, dt, s);
    }
    const __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(s), bc2s), eps);
    pv = _mm256_add_ps(pv, _mm256_div_ps(_mm256_mul_ps(nss, mv), den));
    store8(p, i, dt, pv);
  }
}

/* SGD body; see optim.c. */
void kiln_optim_sgd_avx2(kiln_dtype_t dt, int64_t n, void* p, void* g, void* buf, const float* k,
                         unsigned fl) {
  const __m256 wd = _mm256_set1_ps(k[0]), mom = _mm256_set1_ps(k[1]);
  const __m256 damp = _mm256_set1_ps(k[2]), nlr = _mm256_set1_ps(k[3]);
  const __m256 scale = _mm256_set1_ps(k[4]), sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    __m256 gv = load8(g, i, dt);
    const __m256 pv = load8(p, i, dt);
    if (fl & OPT_SCALE) {
      gv = _mm256_div_ps(gv, scale);
      store8(g, i, dt, gv);
    }
    if (fl & OPT_MAXIMIZE) gv = _mm256_xor_ps(gv, sign);
    if (fl & OPT_WD) gv = _mm256_fmadd_ps(pv, wd, gv);
    if (fl & OPT_MOMENTUM) {
      __m256 b;
      if (fl & OPT_FIRST)
        b = gv;
      else
        b = _mm256_fmadd_ps(damp, gv, _mm256_mul_ps(load8(buf, i, dt), mom));
      store8(buf, i, dt, b);
      gv = (fl & OPT_NESTEROV) ? _mm256_fmadd_ps(b, mom, gv) : b;
    }
    store8(p, i, dt, _mm256_fmadd_ps(gv, nlr, pv));
  }
}
