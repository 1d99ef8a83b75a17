/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/model.h - deployable programs: a .kiln model file (program, signature, weights) loaded
 * and run from plain C, without Python or libtorch.
 *
 * A model file holds one program of the graph compiler (kiln/graph.h), the names, dtypes and
 * shapes of its inputs and outputs, the weights (each 64-byte aligned, so a mapped file is used
 * in place), and, when the program was exported with dynamic dims, the symbols of those dims
 * with their bounds and the expressions that tie the program's sizes to them. One file serves
 * every size within the declared bounds: kiln_model_run instantiates and compiles the program
 * for each new set of sizes (cached) and the workspace is planned at the bound at load.
 * torch_kiln.export writes these files; `kiln-run` (tools/kiln_run.c) runs them.
 *
 * Typical use:
 *   kiln_model_t* m;
 *   KILN_RETURN_IF_ERROR(kiln_model_load("lm.kiln", 0, &m));       // device kiln:0
 *   kiln_tensor_t in, out = {0};                                   // out.data NULL: allocated
 *   int64_t shape[2] = {1, 16};
 *   kiln_tensor_init_contiguous(&in, tokens, KILN_DTYPE_I64, 2, shape);
 *   KILN_RETURN_IF_ERROR(kiln_model_run(m, 1, &in, 1, &out));
 *   ... read out.data (out.dtype, out.ndim, out.shape) ...
 *   kiln_model_free_output(m, out.data); kiln_model_destroy(m);
 *
 * Memory and devices: inputs and outputs are host memory. A run goes through the device's compute
 * slots (kiln/hal.h: prepare once per size, execute on a stream, wait) when the device has them
 * and host-visible memory, as the CPU device does; otherwise kiln's executor runs the program on
 * the host (the ref device today). Staging copies for a device whose memory the host cannot
 * touch come with the first such device. Thread safety: a loaded model is shared read-only; kiln_model_run may be called from
 * any number of threads at once (the specialization cache is locked, runs are independent).
 * Errors are kiln_status_t with a message (kiln_status_message); a corrupt, truncated or
 * hostile file is DATA_LOSS, never a crash, and the loader allocates no more than a small
 * multiple of the file's size before the program is compiled.
 */
#ifndef KILN_MODEL_H
#define KILN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/graph.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_model kiln_model_t;

#define KILN_MODEL_MAX_SYMBOLS 16 /* dynamic-dim symbols per model */

/* ---- loading -------------------------------------------------------------------------------- */

/* Maps the file at `path` (weights are used in place, not copied), checks its header and
 * checksum, rebuilds the program and compiles it at the bound of every dynamic dim, on device
 * `device` of the default registry (kiln_registry_default: KILN_DEVICES lists its drivers,
 * "cpu" alone by default, so 0 is the CPU device). Also reads
 * files written by kiln_exec_save (format versions 1-3; their inputs are named input0, ...).
 * The caller owns *out (kiln_model_destroy). Errors: NOT_FOUND (cannot open, or no such
 * device), DATA_LOSS (not a .kiln file, bad version or checksum, truncated or inconsistent
 * content, a program that does not compile), OUT_OF_MEMORY. */
kiln_status_t kiln_model_load(const char* path, int device, kiln_model_t** out);
/* kiln_model_load from `size` bytes at `data`. The bytes are copied when `data` is not 64-byte
 * aligned, else borrowed: they must then outlive the model. Errors: as kiln_model_load. */
kiln_status_t kiln_model_load_buffer(const void* data, size_t size, int device,
                                     kiln_model_t** out);
/* Frees the model, its compiled specializations and its mapping. NULL is a no-op. Must not
 * overlap a run of the model. */
void kiln_model_destroy(kiln_model_t* m);

/* ---- signature ------------------------------------------------------------------------------ */

/* One input or output. Everything it points to is owned by the model. */
typedef struct kiln_model_io {
  const char* name;
  int dtype;                        /* kiln_dtype_t */
  int ndim;
  int64_t shape[KILN_MAX_DIMS];     /* the size of each dim; a dynamic dim: its upper bound */
  int64_t min[KILN_MAX_DIMS];       /* the smallest size a dim takes (== shape when static) */
  uint32_t dynamic_mask;            /* bit d: dim d varies with a symbol */
  const char* dim_names[KILN_MAX_DIMS]; /* the symbol of an input's dynamic dim, else NULL */
} kiln_model_io_t;

typedef struct kiln_model_info {
  uint32_t format_version;
  int n_inputs, n_outputs, n_symbols;
  uint64_t file_bytes;       /* the whole file */
  uint64_t weight_bytes;     /* the weights section (constants with their alignment padding) */
  int weights_in_place;      /* 1: the weights are read from the mapping, not copied */
  int64_t workspace_bytes;   /* intermediates per run at the bound (the memory plan) */
  int n_specializations;     /* programs compiled so far (one per distinct set of sizes) */
  int device;
} kiln_model_info_t;

int kiln_model_num_inputs(const kiln_model_t* m);
int kiln_model_num_outputs(const kiln_model_t* m);
/* Input / output i's signature. Errors: INVALID_ARGUMENT (NULL), OUT_OF_RANGE (bad i). */
kiln_status_t kiln_model_input_info(const kiln_model_t* m, int i, kiln_model_io_t* out);
kiln_status_t kiln_model_output_info(const kiln_model_t* m, int i, kiln_model_io_t* out);
/* Symbol i of the dynamic dims: its name (owned by the model) and bounds. OUT_OF_RANGE. */
kiln_status_t kiln_model_symbol(const kiln_model_t* m, int i, const char** name, int64_t* min,
                                int64_t* max);
kiln_status_t kiln_model_get_info(const kiln_model_t* m, kiln_model_info_t* out);

/* ---- running -------------------------------------------------------------------------------- */

/* Runs the model on `n_in` contiguous host inputs (dtype and shape must match the signature,
 * dynamic dims within their bounds and consistent with each other). Output k is written to
 * outputs[k].data when that is non-NULL (outputs[k].dtype/ndim/shape must then be exactly the
 * result's, which the call checks); when it is NULL the run allocates it (free it with
 * kiln_model_free_output) and fills in data, dtype, ndim, shape and strides. Errors:
 * INVALID_ARGUMENT (counts, dtypes, shapes, bounds, non-contiguous input, NULL), OUT_OF_RANGE
 * (an index input outside its dim), OUT_OF_MEMORY, and the errors of compiling a new size.
 * On error no output allocated by the call is left behind. */
kiln_status_t kiln_model_run(kiln_model_t* m, int n_in, const kiln_tensor_t* inputs, int n_out,
                             kiln_tensor_t* outputs);
/* The outputs' dtype, ndim, shape and contiguous strides for these inputs (their data is not
 * read and may be NULL); outputs[k].data is set to NULL. Compiles the program for new sizes
 * as kiln_model_run would. Errors: kiln_model_run's. */
kiln_status_t kiln_model_output_shapes(kiln_model_t* m, int n_in, const kiln_tensor_t* inputs,
                                       int n_out, kiln_tensor_t* outputs);
/* Frees an output allocated by kiln_model_run. NULL is a no-op. */
void kiln_model_free_output(kiln_model_t* m, void* data);

/* ---- writing (used by torch_kiln.export; any front end may call it) ------------------------- */

typedef struct kiln_model_symbol {
  const char* name;
  int64_t min, max; /* 0 <= min <= max <= 2^40 */
} kiln_model_symbol_t;

/* Size expressions are postfix programs of int64 tokens: KILN_EXPR_CONST v, KILN_EXPR_SYM k
 * push a value; the others pop two (a then b, b on top) and push a op b. FLOORDIV and MOD
 * round toward negative infinity (Python's // and %); a zero divisor or an overflow is an
 * error when the expression is evaluated. At most KILN_EXPR_MAX_TOKENS tokens. */
enum {
  KILN_EXPR_CONST = 1,
  KILN_EXPR_SYM,
  KILN_EXPR_ADD,
  KILN_EXPR_SUB,
  KILN_EXPR_MUL,
  KILN_EXPR_FLOORDIV,
  KILN_EXPR_MOD,
  KILN_EXPR_MIN,
  KILN_EXPR_MAX,
};
#define KILN_EXPR_MAX_TOKENS 64

typedef struct kiln_model_desc {
  size_t struct_size;               /* sizeof(kiln_model_desc_t) */
  /* The same program built n_graphs times, graph g with symbol values samples[g * n_symbols
   * + k]. graphs[0] is the reference: it should be built at every symbol's max (the plan is
   * made and checked there). Static programs: n_graphs 1, n_symbols 0. */
  int n_graphs;
  const kiln_graph_t* const* graphs;
  int n_symbols;
  const kiln_model_symbol_t* symbols;
  const int64_t* samples;
  /* Candidate expressions for the sizes that differ between the graphs: every integer
   * attribute that differs must equal one candidate at every sample (the first that does is
   * used). expr_len[k] tokens per candidate, concatenated in expr_code. */
  int n_exprs;
  const int64_t* expr_code;
  const int* expr_len;
  const char* const* input_names;   /* NULL, or one per graph input (NULL entry: "input<i>") */
  const char* const* output_names;  /* NULL, or one per graph output */
  int compile_flags;                /* KILN_COMPILE_* */
} kiln_model_desc_t;

/* Writes a model file (format version 3) to `path`. Checks that the graphs are the same
 * program (same nodes, inputs, attributes and constants but for the sizes that differ), that
 * every differing size matches a candidate, that every symbol is exactly some input's dim (so a
 * run can read it from its inputs) and that the reference compiles. Errors: INVALID_ARGUMENT
 * (naming the node and attribute that cannot be expressed), INTERNAL (I/O), OUT_OF_MEMORY. */
kiln_status_t kiln_model_save(const kiln_model_desc_t* desc, const char* path);
/* kiln_model_save into memory: *out_data (free with kiln_exec_free_buffer), *out_size. */
kiln_status_t kiln_model_save_buffer(const kiln_model_desc_t* desc, void** out_data,
                                     size_t* out_size);

#ifdef __cplusplus
}
#endif
#endif /* KILN_MODEL_H */
