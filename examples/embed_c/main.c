/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - a .kiln model (torch_kiln.export) run from plain C: load it, print its signature,
 * fill its inputs with deterministic values (a dynamic dim at its symbol's smallest size, but 4
 * when that fits), run it and print the first output values. `embed_c MODEL.kiln` */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "kiln/model.h"

#define CHECK(expr) do { kiln_status_t s_ = (expr); if (s_) { fprintf(stderr, "embed_c: %s: %s\n", \
  kiln_status_code_name(s_), kiln_status_message()); return 1; } } while (0)

int main(int argc, char** argv) {
  kiln_model_t* m;
  if (argc != 2) { fprintf(stderr, "usage: embed_c MODEL.kiln\n"); return 2; }
  CHECK(kiln_model_load(argv[1], 0, &m));
  kiln_model_info_t info;
  CHECK(kiln_model_get_info(m, &info));
  int n_in = info.n_inputs, n_out = info.n_outputs;
  printf("%s: %d inputs, %d outputs, %d symbols, %llu weight bytes\n", argv[1], n_in, n_out,
         info.n_symbols, (unsigned long long)info.weight_bytes);
  kiln_tensor_t* ins = calloc((size_t)n_in + 1, sizeof *ins);
  kiln_tensor_t* outs = calloc((size_t)n_out + 1, sizeof *outs); /* data NULL: the run allocates */
  for (int i = 0; i < n_in; i++) {
    kiln_model_io_t io;
    int64_t shape[KILN_MAX_DIMS], numel = 1;
    CHECK(kiln_model_input_info(m, i, &io));
    printf("input %d %s: %s [", i, io.name, kiln_dtype_name(io.dtype));
    for (int d = 0; d < io.ndim; d++) {
      shape[d] = io.shape[d];
      for (int k = 0; io.dim_names[d] && k < info.n_symbols; k++) { /* the symbol's value */
        const char* name; int64_t lo, hi;
        CHECK(kiln_model_symbol(m, k, &name, &lo, &hi));
        if (strcmp(name, io.dim_names[d]) == 0) shape[d] = lo > 4 ? lo : (hi < 4 ? hi : 4);
      }
      if (io.dim_names[d]) printf("%s%s %lld..%lld", d ? ", " : "", io.dim_names[d],
                                  (long long)io.min[d], (long long)io.shape[d]);
      else printf("%s%lld", d ? ", " : "", (long long)io.shape[d]);
      numel *= shape[d];
    }
    printf("]\n");
    void* data = calloc((size_t)numel + 1, kiln_dtype_size(io.dtype)); /* other dtypes: zeros */
    for (int64_t j = 0; j < numel; j++) {
      if (io.dtype == KILN_DTYPE_I64) ((int64_t*)data)[j] = j % 7;        /* token ids */
      if (io.dtype == KILN_DTYPE_F32) ((float*)data)[j] = 0.5f * sinf((float)j);
    }
    CHECK(kiln_tensor_init_contiguous(&ins[i], data, io.dtype, io.ndim, shape));
  }
  CHECK(kiln_model_run(m, n_in, ins, n_out, outs));
  for (int k = 0; k < n_out; k++) {
    kiln_model_io_t io;
    CHECK(kiln_model_output_info(m, k, &io));
    printf("output %d %s: %s [", k, io.name, kiln_dtype_name(outs[k].dtype));
    for (int d = 0; d < outs[k].ndim; d++) printf("%s%lld", d ? ", " : "", (long long)outs[k].shape[d]);
    printf("]");
    for (int64_t j = 0; outs[k].dtype == KILN_DTYPE_F32 && j < 4 && j < kiln_tensor_numel(&outs[k]); j++)
      printf(" %g", (double)((const float*)outs[k].data)[j]);
    printf("\n");
    kiln_model_free_output(m, outs[k].data);
  }
  for (int i = 0; i < n_in; i++) free(ins[i].data);
  free(ins); free(outs);
  kiln_model_destroy(m);
  return 0;
}
