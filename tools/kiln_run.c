/* SPDX-License-Identifier: Apache-2.0 */
/* kiln_run.c - the `kiln-run` command: loads a .kiln model file (kiln/model.h), shows its
 * signature, runs it on .npy inputs, writes .npy outputs and benchmarks it. Links only libkiln
 * (with tools/npy.c).
 *
 *   kiln-run MODEL.kiln --info
 *   kiln-run MODEL.kiln --input tokens.npy --output logits.npy
 *   kiln-run MODEL.kiln --input tokens.npy --bench 100 --warmup 5 --device 1
 *
 * Inputs are matched to the signature by position (one --input per model input); output k is
 * written to the k-th --output (fewer --output than outputs: the rest are not written). Exit
 * status: 0 ok, 1 an error (message on stderr), 2 a usage error (bad arguments, or inputs that
 * do not fit the model's signature).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/model.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "npy.h"

#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define PREVIEW 8 /* output values printed */

static const char* prog = "kiln-run";

static void usage(FILE* f) {
  fprintf(f,
          "usage: %s MODEL.kiln [--input IN.npy ...] [--output OUT.npy ...] [--device N]\n"
          "                [--bench N] [--warmup N] [--info]\n"
          "  --input FILE   an input, in the order of the signature (one per model input)\n"
          "  --output FILE  where to write the next output (.npy); outputs without one are not\n"
          "                 written (their first values are printed)\n"
          "  --device N     device index in the default registry (default 0; the devices are\n"
          "                 KILN_DEVICES, default \"cpu\"; KILN_DEVICES=cpu,ref makes 1 the ref)\n"
          "  --bench N      N timed runs after the warm-up: latency min/p50/p90/p99/max and peak\n"
          "                 memory\n"
          "  --warmup N     untimed runs before the timed ones (default 3)\n"
          "  --info         print the signature and sizes (with no --input: then exit)\n"
          "bf16 .npy files hold raw bfloat16 bits with descr '<V2' (ml_dtypes.bfloat16).\n",
          prog);
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int usage_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(%s --help for usage)\n", prog);
  return EXIT_USAGE;
}

static int kiln_failure(const char* what, const char* arg, kiln_status_t s) {
  fflush(stdout); /* what was printed so far comes first */
  fprintf(stderr, "%s: %s%s%s: %s: %s\n", prog, what, arg ? " " : "", arg ? arg : "",
          kiln_status_code_name(s), kiln_status_message());
  return EXIT_ERROR;
}

/* A decimal int in [lo, hi]; 0 when `text` is not one. */
static int parse_int(const char* text, long lo, long hi, int* out) {
  char* end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end != '\0' || v < lo || v > hi) return 0;
  *out = (int)v;
  return 1;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* "123456 (120.6 KiB)" */
static const char* fmt_bytes(char* buf, size_t cap, uint64_t n) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    u++;
  }
  if (u == 0) snprintf(buf, cap, "%llu B", (unsigned long long)n);
  else snprintf(buf, cap, "%llu (%.1f %s)", (unsigned long long)n, v, units[u]);
  return buf;
}

/* "f32[1, seq[1..64], 100]"; an output's dynamic dim has no symbol name: "?[1..64]". */
static const char* fmt_sig(char* buf, size_t cap, const kiln_model_io_t* io) {
  size_t n = (size_t)snprintf(buf, cap, "%s[", kiln_dtype_name((kiln_dtype_t)io->dtype));
  for (int d = 0; d < io->ndim && n < cap; d++) {
    const char* sep = d ? ", " : "";
    if (io->dynamic_mask & (1u << d))
      n += (size_t)snprintf(buf + n, cap - n, "%s%s[%lld..%lld]", sep,
                            io->dim_names[d] ? io->dim_names[d] : "?", (long long)io->min[d],
                            (long long)io->shape[d]);
    else
      n += (size_t)snprintf(buf + n, cap - n, "%s%lld", sep, (long long)io->shape[d]);
  }
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

static const char* fmt_shape(char* buf, size_t cap, int dtype, int ndim, const int64_t* shape) {
  size_t n = (size_t)snprintf(buf, cap, "%s[", kiln_dtype_name((kiln_dtype_t)dtype));
  for (int d = 0; d < ndim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

static int print_info(const kiln_model_t* m) {
  kiln_model_info_t info;
  kiln_model_io_t io;
  char b1[256], b2[64];
  kiln_status_t s = kiln_model_get_info(m, &info);
  if (s) return kiln_failure("model info", NULL, s);
  printf("format version %u, device %d\n", info.format_version, info.device);
  for (int i = 0; i < info.n_inputs; i++) {
    if ((s = kiln_model_input_info(m, i, &io))) return kiln_failure("input info", NULL, s);
    printf("  input  %d  %-16s %s\n", i, io.name, fmt_sig(b1, sizeof b1, &io));
  }
  for (int i = 0; i < info.n_outputs; i++) {
    if ((s = kiln_model_output_info(m, i, &io))) return kiln_failure("output info", NULL, s);
    printf("  output %d  %-16s %s\n", i, io.name, fmt_sig(b1, sizeof b1, &io));
  }
  for (int i = 0; i < info.n_symbols; i++) {
    const char* name;
    int64_t lo, hi;
    if ((s = kiln_model_symbol(m, i, &name, &lo, &hi))) return kiln_failure("symbol", NULL, s);
    printf("  symbol %d  %s in [%lld, %lld]\n", i, name, (long long)lo, (long long)hi);
  }
  if (info.n_symbols == 0) printf("  symbols: none (static shapes)\n");
  printf("file bytes:      %s\n", fmt_bytes(b2, sizeof b2, info.file_bytes));
  printf("weight bytes:    %s, %s\n", fmt_bytes(b2, sizeof b2, info.weight_bytes),
         info.weights_in_place ? "used in place (mapped)" : "copied");
  printf("workspace bytes: %s per run at the bound\n",
         fmt_bytes(b2, sizeof b2, info.workspace_bytes > 0 ? (uint64_t)info.workspace_bytes : 0));
  printf("specializations: %d compiled\n", info.n_specializations);
  return 0;
}

/* The input's .npy against the signature: a friendly message before the library's own check. */
static int check_input(int i, const char* path, const kiln_model_io_t* io, const kiln_npy_t* a) {
  char want[256], got[256];
  fflush(stdout);
  fmt_sig(want, sizeof want, io);
  fmt_shape(got, sizeof got, a->dtype, a->ndim, a->shape);
  int ok = a->dtype == io->dtype && a->ndim == io->ndim;
  for (int d = 0; ok && d < io->ndim; d++)
    ok = (io->dynamic_mask & (1u << d)) ? a->shape[d] >= io->min[d] && a->shape[d] <= io->shape[d]
                                        : a->shape[d] == io->shape[d];
  if (ok) return 0;
  fprintf(stderr, "%s: --input %s is %s; input %d (%s) takes %s\n", prog, path, got, i, io->name,
          want);
  return EXIT_USAGE;
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  float v;
  if (exp == 0) v = ldexpf((float)man, -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = ldexpf((float)(man | 0x400u), (int)exp - 25);
  return sign ? -v : v;
}

static double value_at(int dtype, const void* data, int64_t i) {
  switch (dtype) {
    case KILN_DTYPE_F32: return ((const float*)data)[i];
    case KILN_DTYPE_F64: return ((const double*)data)[i];
    case KILN_DTYPE_F16: return half_to_float(((const uint16_t*)data)[i]);
    case KILN_DTYPE_BF16: {
      uint32_t bits = (uint32_t)((const uint16_t*)data)[i] << 16;
      float f;
      memcpy(&f, &bits, sizeof f);
      return f;
    }
    case KILN_DTYPE_I8: return ((const int8_t*)data)[i];
    case KILN_DTYPE_I16: return ((const int16_t*)data)[i];
    case KILN_DTYPE_I32: return ((const int32_t*)data)[i];
    case KILN_DTYPE_I64: return (double)((const int64_t*)data)[i];
    case KILN_DTYPE_U8: case KILN_DTYPE_BOOL: return ((const uint8_t*)data)[i];
    default: return NAN;
  }
}

static void print_output(int k, const char* name, const kiln_tensor_t* t, const char* path) {
  char shape[256];
  int64_t numel = kiln_tensor_numel(t);
  printf("output %d %s: %s = [", k, name,
         fmt_shape(shape, sizeof shape, t->dtype, t->ndim, t->shape));
  for (int64_t i = 0; i < numel && i < PREVIEW; i++)
    printf("%s%.6g", i ? ", " : "", value_at(t->dtype, t->data, i));
  printf("%s]%s%s\n", numel > PREVIEW ? ", ..." : "", path ? " -> " : "", path ? path : "");
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of n sorted values. */
static double percentile(const double* v, int n, double q) {
  int r = (int)ceil(q * n);
  if (r < 1) r = 1;
  if (r > n) r = n;
  return v[r - 1];
}

static void print_memory(const char* when, kiln_device_t* dev) {
  char b1[64], b2[64];
  kiln_memory_stats_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  kiln_status_t s = dev ? kiln_device_memory_stats(dev, &st) : KILN_ERROR_UNIMPLEMENTED;
  if (s == KILN_OK)
    printf("device memory (%s): peak allocated %s, peak reserved %s\n", when,
           fmt_bytes(b1, sizeof b1, st.peak_allocated), fmt_bytes(b2, sizeof b2, st.peak_reserved));
  else
    printf("device memory (%s): no statistics (%s)\n", when, kiln_status_code_name(s));
}

typedef struct run_args {
  const char* model;
  const char** inputs;
  int n_inputs;
  const char** outputs;
  int n_outputs;
  int device, bench, warmup, info;
} run_args_t;

/* Parses argv into *a; returns 0, or the exit status (EXIT_USAGE, or -1 for --help). */
static int parse_args(int argc, char** argv, run_args_t* a) {
  a->inputs = calloc((size_t)argc, sizeof(char*));
  a->outputs = calloc((size_t)argc, sizeof(char*));
  if (!a->inputs || !a->outputs) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return EXIT_ERROR;
  }
  a->warmup = 3;
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) return -1;
    if (strcmp(arg, "--info") == 0) {
      a->info = 1;
      continue;
    }
    if (strncmp(arg, "--", 2) != 0) {
      if (a->model) return usage_error("more than one model file ('%s')", arg);
      a->model = arg;
      continue;
    }
    /* options with a value: --opt VALUE or --opt=VALUE */
    static const char* const with_value[] = {"--input", "--output", "--device", "--bench",
                                             "--warmup"};
    const char* value = NULL;
    int which = -1;
    for (int k = 0; k < 5; k++) {
      size_t n = strlen(with_value[k]);
      if (strncmp(arg, with_value[k], n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
        which = k;
        value = arg[n] == '=' ? arg + n + 1 : (i + 1 < argc ? argv[++i] : NULL);
        break;
      }
    }
    if (which < 0) return usage_error("unknown option '%s'", arg);
    if (!value || !*value) return usage_error("%s needs a value", with_value[which]);
    switch (which) {
      case 0: a->inputs[a->n_inputs++] = value; break;
      case 1: a->outputs[a->n_outputs++] = value; break;
      case 2:
        if (!parse_int(value, 0, KILN_MAX_DEVICES - 1, &a->device))
          return usage_error("--device: '%s' is not a device index", value);
        break;
      case 3:
        if (!parse_int(value, 1, 100000000, &a->bench))
          return usage_error("--bench: '%s' is not a run count >= 1", value);
        break;
      case 4:
        if (!parse_int(value, 0, 100000000, &a->warmup))
          return usage_error("--warmup: '%s' is not a run count >= 0", value);
        break;
    }
  }
  if (!a->model) return usage_error("%s", "no model file given");
  return 0;
}

/* Everything after argument parsing; the caller frees what *st holds. */
typedef struct run_state {
  kiln_model_t* m;
  kiln_npy_t* in_npy;
  kiln_tensor_t* ins;
  kiln_tensor_t* outs;
  int n_in, n_out;
  double* lat;
} run_state_t;

static int run(const run_args_t* a, run_state_t* st) {
  char err[512];
  kiln_status_t s;
  double t0 = now_ms();
  if ((s = kiln_model_load(a->model, a->device, &st->m))) return kiln_failure("load", a->model, s);
  double load_ms = now_ms() - t0;
  printf("model %s: loaded in %.3f ms\n", a->model, load_ms);
  if (a->info && print_info(st->m)) return EXIT_ERROR;
  st->n_in = kiln_model_num_inputs(st->m);
  st->n_out = kiln_model_num_outputs(st->m);
  if (a->info && a->n_inputs == 0) return 0;
  if (a->n_inputs != st->n_in) {
    fflush(stdout);
    fprintf(stderr, "%s: the model takes %d input%s, %d --input given (see --info)\n", prog,
            st->n_in, st->n_in == 1 ? "" : "s", a->n_inputs);
    return EXIT_USAGE;
  }
  if (a->n_outputs > st->n_out) {
    fflush(stdout);
    fprintf(stderr, "%s: the model has %d output%s, %d --output given\n", prog, st->n_out,
            st->n_out == 1 ? "" : "s", a->n_outputs);
    return EXIT_USAGE;
  }

  st->in_npy = calloc((size_t)st->n_in + 1, sizeof(kiln_npy_t));
  st->ins = calloc((size_t)st->n_in + 1, sizeof(kiln_tensor_t));
  st->outs = calloc((size_t)st->n_out + 1, sizeof(kiln_tensor_t));
  if (!st->in_npy || !st->ins || !st->outs) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return EXIT_ERROR;
  }
  for (int i = 0; i < st->n_in; i++) {
    kiln_model_io_t io;
    if ((s = kiln_model_input_info(st->m, i, &io))) return kiln_failure("input info", NULL, s);
    if (kiln_npy_read(a->inputs[i], &st->in_npy[i], err, sizeof err) != KILN_OK) {
      fflush(stdout);
      fprintf(stderr, "%s: --input %s\n", prog, err);
      return EXIT_ERROR;
    }
    int rc = check_input(i, a->inputs[i], &io, &st->in_npy[i]);
    if (rc) return rc;
    s = kiln_tensor_init_contiguous(&st->ins[i], st->in_npy[i].data,
                                    (kiln_dtype_t)st->in_npy[i].dtype, st->in_npy[i].ndim,
                                    st->in_npy[i].shape);
    if (s) return kiln_failure("--input", a->inputs[i], s);
  }

  /* the first run: outputs allocated by the library (it compiles a new size here) */
  t0 = now_ms();
  if ((s = kiln_model_run(st->m, st->n_in, st->ins, st->n_out, st->outs))) {
    memset(st->outs, 0, sizeof(kiln_tensor_t) * (size_t)st->n_out); /* nothing left to free */
    return kiln_failure("run", a->model, s);
  }
  printf("first run: %.3f ms\n", now_ms() - t0);
  for (int k = 0; k < st->n_out; k++) {
    kiln_model_io_t io;
    const char* path = k < a->n_outputs ? a->outputs[k] : NULL;
    if ((s = kiln_model_output_info(st->m, k, &io))) return kiln_failure("output info", NULL, s);
    if (path && kiln_npy_write(path, st->outs[k].dtype, st->outs[k].ndim, st->outs[k].shape,
                               st->outs[k].data, err, sizeof err) != KILN_OK) {
      fflush(stdout);
      fprintf(stderr, "%s: --output %s\n", prog, err);
      return EXIT_ERROR;
    }
    print_output(k, io.name, &st->outs[k], path);
  }
  if (a->bench == 0) return 0;

  /* the benchmark: runs into the outputs of the first run (no allocation per run) */
  kiln_registry_t* reg = NULL;
  kiln_device_t* dev = NULL;
  if (kiln_registry_default(&reg) != KILN_OK || kiln_registry_get(reg, a->device, &dev) != KILN_OK)
    dev = NULL;
  print_memory("load + first run", dev);
  for (int r = 0; r < a->warmup; r++)
    if ((s = kiln_model_run(st->m, st->n_in, st->ins, st->n_out, st->outs)))
      return kiln_failure("warm-up run", a->model, s);
  if (dev) kiln_device_memory_reset_peak(dev);
  st->lat = malloc(sizeof(double) * (size_t)a->bench);
  if (!st->lat) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return EXIT_ERROR;
  }
  double total = now_ms();
  for (int r = 0; r < a->bench; r++) {
    t0 = now_ms();
    if ((s = kiln_model_run(st->m, st->n_in, st->ins, st->n_out, st->outs)))
      return kiln_failure("timed run", a->model, s);
    st->lat[r] = now_ms() - t0;
  }
  total = now_ms() - total;
  qsort(st->lat, (size_t)a->bench, sizeof(double), cmp_double);
  printf("bench: %d runs after %d warm-up: min %.4f  p50 %.4f  p90 %.4f  p99 %.4f  max %.4f ms"
         " (mean %.4f)\n",
         a->bench, a->warmup, st->lat[0], percentile(st->lat, a->bench, 0.50),
         percentile(st->lat, a->bench, 0.90), percentile(st->lat, a->bench, 0.99),
         st->lat[a->bench - 1], total / a->bench);
  print_memory("timed runs", dev);
  struct rusage ru;
  char b[64];
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    printf("process peak RSS: %s\n", fmt_bytes(b, sizeof b, (uint64_t)ru.ru_maxrss * 1024u));
  return 0;
}

int main(int argc, char** argv) {
  run_args_t a;
  run_state_t st;
  memset(&a, 0, sizeof a);
  memset(&st, 0, sizeof st);
  int rc = parse_args(argc, argv, &a);
  if (rc == -1) {
    usage(stdout);
    rc = 0;
  } else if (rc == 0) {
    rc = run(&a, &st);
  }
  for (int k = 0; st.outs && k < st.n_out; k++) kiln_model_free_output(st.m, st.outs[k].data);
  for (int i = 0; st.in_npy && i < st.n_in; i++) kiln_npy_free(&st.in_npy[i]);
  kiln_model_destroy(st.m);
  free(st.in_npy);
  free(st.ins);
  free(st.outs);
  free(st.lat);
  free(a.inputs);
  free(a.outputs);
  return rc;
}
