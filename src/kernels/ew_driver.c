/* SPDX-License-Identifier: Apache-2.0 */
/* ew_driver.c - runs a pointwise kernel over broadcast, strided, mixed-dtype operands.
 *
 * Each row handed out by the iterator is processed directly when every operand is contiguous and
 * already in the kernel's internal type (the common case: no copies at all). Otherwise it is cut
 * into KILN_EW_BLOCK-element chunks: inputs are converted (and rounded to f16/bf16 where the
 * compute dtype asks for it) into stack buffers, the kernel runs on the buffers, and the result is
 * converted back into the strided output. Inputs are read before the output chunk is written, so
 * an output that aliases an input is safe. */
#include "kernels/ew_internal.h"

typedef struct {
  const kiln_ew_desc_t* d;
  const kiln_iter_t* it;
  int nin;
  int err;
} ew_ctx_t;

static int is_half(kiln_dtype_t t) { return t == KILN_DTYPE_F16 || t == KILN_DTYPE_BF16; }

static void ew_loop(void* ctx, char** ptrs, const int64_t* strides, int64_t n) {
  ew_ctx_t* c = ctx;
  const kiln_ew_desc_t* d = c->d;
  const kiln_iter_t* it = c->it;
  const int nin = c->nin;
  const int64_t osz = (int64_t)kiln_dtype_size(d->out_type);
  const int round_out = d->round_out && it->dtype[0] != d->compute;
  int direct_in[3], round_in[3];
  int all_direct = !round_out && it->dtype[0] == d->out_type && strides[0] == osz;
  for (int k = 0; k < nin; k++) {
    kiln_dtype_t t = d->in_type[k];
    round_in[k] = t == KILN_DTYPE_F32 && is_half(d->compute) && it->dtype[k + 1] != d->compute &&
                  !d->no_round[k];
    direct_in[k] = !round_in[k] && it->dtype[k + 1] == t &&
                   strides[k + 1] == (int64_t)kiln_dtype_size(t);
    all_direct &= direct_in[k];
  }
  int err = 0;
  if (all_direct) {
    const void* in[3] = {ptrs[1], nin > 1 ? ptrs[2] : NULL, nin > 2 ? ptrs[3] : NULL};
    err = d->kernel(n, ptrs[0], in, &d->args);
  } else {
    _Alignas(64) char buf[4][KILN_EW_BLOCK * 8];
    int filled[3] = {0, 0, 0}; /* a broadcast input (stride 0): converted once, reused per block */
    for (int k = 0; k < nin; k++) {
      if (direct_in[k] || strides[k + 1] != 0) continue;
      const int64_t m = n < KILN_EW_BLOCK ? n : KILN_EW_BLOCK;
      kiln_cvt(it->dtype[k + 1], ptrs[k + 1], 0, d->in_type[k], buf[k + 1],
               (int64_t)kiln_dtype_size(d->in_type[k]), m);
      if (round_in[k]) kiln_cvt_round_f32(d->compute, (float*)buf[k + 1], m);
      filled[k] = 1;
    }
    for (int64_t off = 0; off < n; off += KILN_EW_BLOCK) {
      const int64_t m = n - off < KILN_EW_BLOCK ? n - off : KILN_EW_BLOCK;
      const void* in[3] = {NULL, NULL, NULL};
      for (int k = 0; k < nin; k++) {
        const char* p = ptrs[k + 1] + off * strides[k + 1];
        if (direct_in[k]) {
          in[k] = p;
          continue;
        }
        if (filled[k]) {
          in[k] = buf[k + 1];
          continue;
        }
        kiln_cvt(it->dtype[k + 1], p, strides[k + 1], d->in_type[k], buf[k + 1],
                 (int64_t)kiln_dtype_size(d->in_type[k]), m);
        if (round_in[k]) kiln_cvt_round_f32(d->compute, (float*)buf[k + 1], m);
        in[k] = buf[k + 1];
      }
      char* op = ptrs[0] + off * strides[0];
      const int out_direct = !round_out && it->dtype[0] == d->out_type && strides[0] == osz;
      void* o = out_direct ? (void*)op : (void*)buf[0];
      err |= d->kernel(m, o, in, &d->args);
      if (!out_direct) {
        if (round_out) kiln_cvt_round_f32(d->compute, (float*)buf[0], m);
        kiln_cvt(d->out_type, buf[0], osz, it->dtype[0], op, strides[0], m);
      }
    }
  }
  if (err) __atomic_store_n(&c->err, 1, __ATOMIC_RELAXED);
}

kiln_status_t kiln_ew_run(const kiln_ew_desc_t* desc, kiln_tensor_t* out,
                          const kiln_tensor_t* const* ins, int nin) {
  kiln_iter_t it;
  KILN_RETURN_IF_ERROR(kiln_iter_init(&it, out, ins, nin, desc->name));
  ew_ctx_t c = {desc, &it, nin, 0};
  kiln_iter_run(&it, KILN_ITER_GRAIN, ew_loop, &c);
  if (c.err) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "ZeroDivisionError");
  return KILN_OK;
}
