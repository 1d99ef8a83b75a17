/* SPDX-License-Identifier: Apache-2.0 */
/* model.c - kiln/model.h: model files loaded (mapped in place), specialized per set of dynamic
 * sizes, and run from plain C.
 *
 * A model holds the parsed file (serialize.c: nodes, symbols, expressions, names; constants
 * point into the mapping) and a cache of compiled specializations, one per distinct tuple of
 * symbol values. The first is the reference (every symbol at its bound), compiled at load and
 * checked against the plan the file records; its arena is the workspace the plan promises.
 * Every specialization borrows the mapped weights (gx_compile with shared constants), so a new
 * size costs a compile, never a copy of the weights.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "graph/graph_internal.h"
#include "kiln/allocator.h"
#include "kiln/device.h"
#include "kiln/model.h"
#include "runtime/checked.h"

#define BADARG(...) kiln_error(KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)
#define SPEC_CACHE_MAX 64

typedef struct {
  int64_t syms[KILN_MODEL_MAX_SYMBOLS];
  kiln_exec_t* e;
  kiln_executable_t* x; /* the device's executable of e (NULL: the host runs e) */
} spec_t;

#define STREAM_POOL_MAX 16

struct kiln_model {
  gx_file* f;
  void* map; /* mmap of the file (NULL when read or borrowed) */
  size_t map_len;
  unsigned char* owned; /* a copy of the bytes (unaligned buffers, or mmap unavailable) */
  int in_place;
  int device;
  kiln_device_t* dev;
  kiln_model_io_t* ins;
  kiln_model_io_t* outs;
  int64_t workspace_bytes;
  int use_device; /* the device has compute slots and host-visible memory: runs go through it */
  pthread_mutex_t lock; /* the cache and the stream pool */
  spec_t specs[SPEC_CACHE_MAX];
  int n_specs;
  kiln_stream_t* streams[STREAM_POOL_MAX]; /* idle streams of the device, one per concurrent run */
  int n_streams;
};

void kiln_model_destroy(kiln_model_t* m) {
  if (!m) return;
  for (int k = 0; k < m->n_streams; k++) kiln_stream_destroy(m->dev, m->streams[k]);
  for (int k = 0; k < m->n_specs; k++) {
    kiln_executable_destroy(m->dev, m->specs[k].x);
    kiln_exec_destroy(m->specs[k].e);
  }
  gx_file_free(m->f);
  kiln_allocator_free(NULL, m->ins);
  kiln_allocator_free(NULL, m->outs);
  if (m->map) munmap(m->map, m->map_len);
  kiln_allocator_free(NULL, m->owned);
  pthread_mutex_destroy(&m->lock);
  kiln_allocator_free(NULL, m);
}

/* The device's executable for a compiled specialization, when runs go through the device. */
static kiln_status_t prepare_on_device(const kiln_model_t* m, const kiln_exec_t* e, kiln_executable_t** x) {
  *x = NULL;
  if (!m->use_device) return KILN_OK;
  char why[256];
  if (kiln_device_supports(m->dev, e, why, sizeof why) != KILN_OK)
    return kiln_error(KILN_ERROR_UNIMPLEMENTED, "kiln model: device kiln:%d cannot run the program: %s",
                      m->device, why);
  return kiln_device_prepare(m->dev, e, x);
}

/* Builds and compiles the program at symbol values syms (borrowing the weights). */
static kiln_status_t specialize(const kiln_model_t* m, const int64_t* syms, int from_file,
                                kiln_exec_t** out) {
  /* version 3 keeps every constant 64-byte aligned in its weights section: borrowed in place.
   * Older files hold constants inline at any offset: copied (aligned) per specialization. */
  const int borrow = m->f->version >= 3;
  kiln_graph_t* g;
  KILN_RETURN_IF_ERROR(gx_file_instantiate(m->f, syms, borrow, from_file, &g));
  kiln_status_t st = gx_compile(g, m->f->flags, borrow, out);
  kiln_graph_destroy(g);
  if (st != KILN_OK && st != KILN_ERROR_OUT_OF_MEMORY) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s", kiln_status_message());
    st = kiln_error(from_file ? KILN_ERROR_DATA_LOSS : KILN_ERROR_INVALID_ARGUMENT,
                    "kiln model: the program does not compile%s: %s",
                    from_file ? "" : " at these sizes", msg);
  }
  return st;
}

static void io_from_value(const kiln_graph_t* g, int vid, const char* name, kiln_model_io_t* io) {
  const gx_value* v = &g->values[vid];
  memset(io, 0, sizeof *io);
  io->name = name;
  io->dtype = v->dtype;
  io->ndim = v->ndim;
  for (int d = 0; d < v->ndim; d++) io->shape[d] = io->min[d] = v->shape[d];
}

/* The signature: shapes at the reference, dynamic dims and their smallest sizes. */
static kiln_status_t build_signature(kiln_model_t* m) {
  const gx_file* f = m->f;
  const kiln_graph_t* ref = m->specs[0].e->src;
  m->ins = kiln_allocator_alloc(NULL, sizeof(kiln_model_io_t) * (size_t)(f->n_inputs + 1), 64);
  m->outs = kiln_allocator_alloc(NULL, sizeof(kiln_model_io_t) * (size_t)(f->n_outputs + 1), 64);
  if (!m->ins || !m->outs) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_load: out of memory");
  int64_t mins[KILN_MODEL_MAX_SYMBOLS];
  for (int k = 0; k < f->n_symbols; k++) mins[k] = f->sym_min[k];
  int ii = 0;
  for (int n = 0; n < f->n_nodes; n++) {
    const gx_fnode* node = &f->nodes[n];
    if (node->op != GX_OP_INPUT) continue;
    kiln_model_io_t* io = &m->ins[ii];
    io_from_value(ref, ref->inputs[ii], f->input_names[ii], io);
    for (int j = node->first_bind; j < node->first_bind + node->n_bind; j++) {
      int d = f->bind_slot[j], e = f->bind_expr[j];
      if (d >= io->ndim) continue;
      const int64_t* c = f->expr_code + f->expr_off[e];
      int64_t lo;
      io->dynamic_mask |= 1u << d;
      if (gx_expr_eval(c, f->expr_len[e], mins, f->n_symbols, &lo) == KILN_OK && lo >= 0 &&
          lo <= io->shape[d])
        io->min[d] = lo;
      if (f->expr_len[e] == 2 && c[0] == KILN_EXPR_SYM) io->dim_names[d] = f->sym_names[c[1]];
    }
    ii++;
  }
  for (int k = 0; k < f->n_outputs; k++) io_from_value(ref, ref->outputs[k], f->output_names[k], &m->outs[k]);
  if (f->n_symbols) {
    /* output dims that differ at the lower bounds vary */
    kiln_graph_t* g = NULL;
    if (gx_file_instantiate(f, mins, f->version >= 3, 0, &g) == KILN_OK) {
      for (int k = 0; k < f->n_outputs; k++) {
        const gx_value* v = &g->values[g->outputs[k]];
        kiln_model_io_t* io = &m->outs[k];
        for (int d = 0; d < io->ndim && d < v->ndim; d++)
          if (v->shape[d] != io->shape[d]) {
            io->dynamic_mask |= 1u << d;
            io->min[d] = v->shape[d] < io->shape[d] ? v->shape[d] : io->shape[d];
          }
      }
      kiln_graph_destroy(g);
    }
  }
  return KILN_OK;
}

/* Finishes a model whose bytes are set: parse, device, reference specialization, signature. */
static kiln_status_t finish_load(kiln_model_t* m, const unsigned char* data, size_t size, int device) {
  kiln_registry_t* reg;
  KILN_RETURN_IF_ERROR(kiln_registry_default(&reg));
  if (kiln_registry_get(reg, device, &m->dev) != KILN_OK)
    return kiln_error(KILN_ERROR_NOT_FOUND, "kiln_model_load: no device kiln:%d (%d devices)", device,
                      (int)kiln_registry_count(reg));
  m->device = device;
  KILN_RETURN_IF_ERROR(gx_file_parse(data, size, &m->f));
  const gx_file* f = m->f;
  spec_t* s = &m->specs[0];
  for (int k = 0; k < f->n_symbols; k++) s->syms[k] = f->sym_max[k];
  kiln_device_props_t props;
  memset(&props, 0, sizeof props);
  props.struct_size = sizeof props;
  KILN_RETURN_IF_ERROR(kiln_device_props(m->dev, &props));
  m->use_device = KILN_HAL_HAS(m->dev->vtable, execute) && (props.capabilities & KILN_CAP_HOST_VISIBLE);
  KILN_RETURN_IF_ERROR(specialize(m, s->syms, 1, &s->e));
  m->n_specs = 1;
  KILN_RETURN_IF_ERROR(prepare_on_device(m, s->e, &s->x));
  const kiln_exec_stats_t* st = &s->e->stats;
  if (st->arena_bytes != f->summary[0] || st->n_kernels_per_run != f->summary[1] ||
      st->n_nodes_after != f->summary[2] || st->n_fused_groups != f->summary[3])
    return kiln_error(KILN_ERROR_DATA_LOSS, "kiln_model_load: the rebuilt plan differs from the saved one");
  m->workspace_bytes = s->e->arena_bytes;
  return build_signature(m);
}

static kiln_status_t new_model(kiln_model_t** out) {
  kiln_model_t* m = kiln_allocator_alloc(NULL, sizeof(kiln_model_t), 64);
  if (!m) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_load: out of memory");
  memset(m, 0, sizeof *m);
  if (pthread_mutex_init(&m->lock, NULL) != 0) {
    kiln_allocator_free(NULL, m);
    return kiln_error(KILN_ERROR_INTERNAL, "kiln_model_load: cannot create a mutex");
  }
  *out = m;
  return KILN_OK;
}

kiln_status_t kiln_model_load_buffer(const void* data, size_t size, int device, kiln_model_t** out) {
  if (!out) return BADARG("kiln_model_load: NULL out");
  *out = NULL;
  if (!data) return BADARG("kiln_model_load: NULL data");
  kiln_model_t* m;
  KILN_RETURN_IF_ERROR(new_model(&m));
  const unsigned char* bytes = data;
  if ((uintptr_t)data % GX_ALIGN) {
    m->owned = kiln_allocator_alloc(NULL, size ? size : 1, GX_ALIGN);
    if (!m->owned) {
      kiln_model_destroy(m);
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_load: out of memory");
    }
    memcpy(m->owned, data, size);
    bytes = m->owned;
  } else {
    m->in_place = 1;
  }
  kiln_status_t st = finish_load(m, bytes, size, device);
  if (st != KILN_OK) {
    kiln_model_destroy(m);
    return st;
  }
  *out = m;
  return KILN_OK;
}

kiln_status_t kiln_model_load(const char* path, int device, kiln_model_t** out) {
  if (!out) return BADARG("kiln_model_load: NULL out");
  *out = NULL;
  if (!path) return BADARG("kiln_model_load: NULL path");
  kiln_model_t* m;
  KILN_RETURN_IF_ERROR(new_model(&m));
  const unsigned char* bytes = NULL;
  size_t size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    kiln_model_destroy(m);
    return kiln_error(KILN_ERROR_NOT_FOUND, "kiln_model_load: cannot open %s", path);
  }
  struct stat sb;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
    void* p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      m->map = p;
      m->map_len = (size_t)sb.st_size;
      m->in_place = 1;
      bytes = p;
      size = m->map_len;
    }
  }
  close(fd);
  kiln_status_t st = KILN_OK;
  if (!bytes) { /* not mappable (a pipe, an empty file, no mmap): read it */
    st = gx_read_file(path, &m->owned, &size, "kiln_model_load");
    bytes = m->owned;
  }
  if (st == KILN_OK) st = finish_load(m, bytes, size, device);
  if (st != KILN_OK) {
    kiln_model_destroy(m);
    return st;
  }
  *out = m;
  return KILN_OK;
}

int kiln_model_num_inputs(const kiln_model_t* m) { return m ? m->f->n_inputs : 0; }
int kiln_model_num_outputs(const kiln_model_t* m) { return m ? m->f->n_outputs : 0; }

kiln_status_t kiln_model_input_info(const kiln_model_t* m, int i, kiln_model_io_t* out) {
  if (!m || !out) return BADARG("kiln_model_input_info: NULL argument");
  if (i < 0 || i >= m->f->n_inputs)
    return kiln_error(KILN_ERROR_OUT_OF_RANGE, "kiln_model_input_info: no input %d (%d inputs)", i,
                      m->f->n_inputs);
  *out = m->ins[i];
  return KILN_OK;
}

kiln_status_t kiln_model_output_info(const kiln_model_t* m, int i, kiln_model_io_t* out) {
  if (!m || !out) return BADARG("kiln_model_output_info: NULL argument");
  if (i < 0 || i >= m->f->n_outputs)
    return kiln_error(KILN_ERROR_OUT_OF_RANGE, "kiln_model_output_info: no output %d (%d outputs)",
                      i, m->f->n_outputs);
  *out = m->outs[i];
  return KILN_OK;
}

kiln_status_t kiln_model_symbol(const kiln_model_t* m, int i, const char** name, int64_t* min,
                                int64_t* max) {
  if (!m) return BADARG("kiln_model_symbol: NULL model");
  if (i < 0 || i >= m->f->n_symbols)
    return kiln_error(KILN_ERROR_OUT_OF_RANGE, "kiln_model_symbol: no symbol %d (%d symbols)", i,
                      m->f->n_symbols);
  if (name) *name = m->f->sym_names[i];
  if (min) *min = m->f->sym_min[i];
  if (max) *max = m->f->sym_max[i];
  return KILN_OK;
}

kiln_status_t kiln_model_get_info(const kiln_model_t* m, kiln_model_info_t* out) {
  if (!m || !out) return BADARG("kiln_model_get_info: NULL argument");
  memset(out, 0, sizeof *out);
  out->format_version = m->f->version;
  out->n_inputs = m->f->n_inputs;
  out->n_outputs = m->f->n_outputs;
  out->n_symbols = m->f->n_symbols;
  out->file_bytes = m->f->file_bytes;
  out->weight_bytes = m->f->weight_bytes;
  out->weights_in_place = m->in_place && m->f->version >= 3;
  out->workspace_bytes = m->workspace_bytes;
  pthread_mutex_lock((pthread_mutex_t*)&m->lock);
  out->n_specializations = m->n_specs;
  pthread_mutex_unlock((pthread_mutex_t*)&m->lock);
  out->device = m->device;
  return KILN_OK;
}

/* The input checks that need only the signature; fills syms from the inputs. */
static kiln_status_t check_inputs(const kiln_model_t* m, int n_in, const kiln_tensor_t* inputs,
                                  int need_data, int64_t* syms) {
  const gx_file* f = m->f;
  if (n_in != f->n_inputs)
    return BADARG("kiln_model_run: %d inputs given, the model takes %d", n_in, f->n_inputs);
  if (n_in && !inputs) return BADARG("kiln_model_run: NULL inputs");
  for (int i = 0; i < n_in; i++) {
    const kiln_tensor_t* t = &inputs[i];
    const kiln_model_io_t* io = &m->ins[i];
    if ((int)t->dtype != io->dtype)
      return BADARG("kiln_model_run: input %d (%s) is %s, the model takes %s", i, io->name,
                    kiln_dtype_name(t->dtype), kiln_dtype_name((kiln_dtype_t)io->dtype));
    if (t->ndim != io->ndim)
      return BADARG("kiln_model_run: input %d (%s) has %d dims, the model takes %d", i, io->name,
                    (int)t->ndim, io->ndim);
    for (int d = 0; d < t->ndim; d++)
      if (t->shape[d] < io->min[d] || t->shape[d] > io->shape[d])
        return BADARG("kiln_model_run: input %d (%s) dim %d is %lld; the model takes %s%lld..%lld",
                      i, io->name, d, (long long)t->shape[d], io->dim_names[d] ? io->dim_names[d] : "",
                      (long long)io->min[d], (long long)io->shape[d]);
    if (!kiln_tensor_is_contiguous(t))
      return BADARG("kiln_model_run: input %d (%s) is not contiguous", i, io->name);
    int64_t numel;
    if (!kiln_numel_capped(t->shape, t->ndim, KILN_NUMEL_MAX, &numel))
      return BADARG("kiln_model_run: input %d (%s): bad shape", i, io->name);
    if (need_data && numel && !t->data)
      return BADARG("kiln_model_run: input %d (%s) has NULL data", i, io->name);
  }
  for (int k = 0; k < f->n_symbols; k++) syms[k] = inputs[f->sym_input[k]].shape[f->sym_dim[k]];
  return KILN_OK;
}

/* The compiled program for these sizes: from the cache, or compiled (and cached while there is
 * room; *temp = 1 when the caller must destroy it after the run, with release_spec). */
static kiln_status_t get_spec(kiln_model_t* m, const int64_t* syms, spec_t* out, int* temp) {
  const int ns = m->f->n_symbols;
  *temp = 0;
  pthread_mutex_lock(&m->lock);
  for (int k = 0; k < m->n_specs; k++)
    if (memcmp(m->specs[k].syms, syms, sizeof(int64_t) * (size_t)ns) == 0) {
      *out = m->specs[k];
      pthread_mutex_unlock(&m->lock);
      return KILN_OK;
    }
  spec_t s;
  memset(&s, 0, sizeof s);
  memcpy(s.syms, syms, sizeof(int64_t) * (size_t)ns);
  kiln_status_t st = specialize(m, syms, 0, &s.e); /* under the lock: one compile per new size */
  if (st == KILN_OK) {
    st = prepare_on_device(m, s.e, &s.x);
    if (st != KILN_OK) kiln_exec_destroy(s.e);
  }
  if (st == KILN_OK) {
    if (m->n_specs < SPEC_CACHE_MAX) m->specs[m->n_specs++] = s;
    else *temp = 1;
    *out = s;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

static void release_spec(kiln_model_t* m, spec_t* s, int temp) {
  if (!temp) return;
  kiln_executable_destroy(m->dev, s->x);
  kiln_exec_destroy(s->e);
}

/* A stream of the device for one run: an idle one of the pool, or a new one. */
static kiln_status_t take_stream(kiln_model_t* m, kiln_stream_t** out) {
  pthread_mutex_lock(&m->lock);
  if (m->n_streams > 0) {
    *out = m->streams[--m->n_streams];
    pthread_mutex_unlock(&m->lock);
    return KILN_OK;
  }
  pthread_mutex_unlock(&m->lock);
  return kiln_stream_create(m->dev, out);
}

static void give_stream(kiln_model_t* m, kiln_stream_t* s) {
  pthread_mutex_lock(&m->lock);
  if (m->n_streams < STREAM_POOL_MAX) {
    m->streams[m->n_streams++] = s;
    s = NULL;
  }
  pthread_mutex_unlock(&m->lock);
  if (s) kiln_stream_destroy(m->dev, s);
}

/* One run of a specialization: through the device (execute on a stream of the pool, then wait:
 * the run's errors come back from the synchronize) or, on a device without compute slots, by
 * the host executor over the same buffers. */
static kiln_status_t run_spec(kiln_model_t* m, const spec_t* s, int n_in, void* const* ip, int n_out,
                              void* const* op, void* ws, int64_t ws_bytes) {
  if (!s->x) return kiln_exec_run_workspace(s->e, n_in, ip, n_out, op, ws, ws_bytes);
  kiln_stream_t* stream;
  KILN_RETURN_IF_ERROR(take_stream(m, &stream));
  kiln_execute_args_t a = {sizeof a, n_in, (const void* const*)ip, n_out, op, ws,
                           (uint64_t)(ws_bytes > 0 ? ws_bytes : 0), KILN_EXECUTE_WAIT};
  kiln_status_t st = kiln_device_execute(m->dev, stream, s->x, &a);
  kiln_status_t sync = kiln_stream_synchronize(m->dev, stream);
  give_stream(m, stream);
  return st != KILN_OK ? st : sync;
}

/* Input shapes against the specialization (dims tied by expressions) and output shapes out. */
static kiln_status_t check_spec(const kiln_model_t* m, const kiln_exec_t* e, const kiln_tensor_t* inputs) {
  for (int i = 0; i < m->f->n_inputs; i++) {
    int nd;
    int64_t shape[KILN_MAX_DIMS];
    KILN_RETURN_IF_ERROR(kiln_exec_input_info(e, i, NULL, &nd, shape));
    for (int d = 0; d < nd; d++)
      if (shape[d] != inputs[i].shape[d])
        return BADARG("kiln_model_run: input %d (%s) dim %d is %lld, but the other inputs' sizes "
                      "make it %lld", i, m->ins[i].name, d, (long long)inputs[i].shape[d],
                      (long long)shape[d]);
  }
  return KILN_OK;
}

/* What kiln_model_output_shapes and kiln_model_run share: the argument and input checks, and
 * the specialization for the inputs' sizes (released again on error). */
static kiln_status_t begin_call(kiln_model_t* m, const char* what, int n_in, const kiln_tensor_t* inputs,
                                int n_out, const kiln_tensor_t* outputs, int need_data, spec_t* sp,
                                int* temp) {
  if (!m) return BADARG("%s: NULL model", what);
  if (n_out != m->f->n_outputs || (n_out && !outputs))
    return BADARG("%s: %d outputs given, the model has %d", what, n_out, m->f->n_outputs);
  int64_t syms[KILN_MODEL_MAX_SYMBOLS];
  KILN_RETURN_IF_ERROR(check_inputs(m, n_in, inputs, need_data, syms));
  KILN_RETURN_IF_ERROR(get_spec(m, syms, sp, temp));
  kiln_status_t st = check_spec(m, sp->e, inputs);
  if (st != KILN_OK) release_spec(m, sp, *temp);
  return st;
}

kiln_status_t kiln_model_output_shapes(kiln_model_t* m, int n_in, const kiln_tensor_t* inputs,
                                       int n_out, kiln_tensor_t* outputs) {
  spec_t sp;
  int temp;
  KILN_RETURN_IF_ERROR(begin_call(m, "kiln_model_output_shapes", n_in, inputs, n_out, outputs, 0, &sp, &temp));
  kiln_exec_t* e = sp.e;
  kiln_status_t st = KILN_OK;
  for (int k = 0; k < n_out && st == KILN_OK; k++) {
    int dt, nd;
    int64_t shape[KILN_MAX_DIMS];
    st = kiln_exec_output_info(e, k, &dt, &nd, shape);
    if (st == KILN_OK) kiln_tensor_init_contiguous(&outputs[k], NULL, (kiln_dtype_t)dt, nd, shape);
  }
  release_spec(m, &sp, temp);
  return st;
}

kiln_status_t kiln_model_run(kiln_model_t* m, int n_in, const kiln_tensor_t* inputs, int n_out,
                             kiln_tensor_t* outputs) {
  spec_t sp;
  int temp;
  KILN_RETURN_IF_ERROR(begin_call(m, "kiln_model_run", n_in, inputs, n_out, outputs, 1, &sp, &temp));
  kiln_exec_t* e = sp.e;
  kiln_status_t st = KILN_OK;
  void* in_ptrs[64];
  void* out_ptrs[64];
  unsigned char alloc_flags[64] = {0};
  void** ip = n_in <= 64 ? in_ptrs : kiln_allocator_alloc(NULL, sizeof(void*) * (size_t)n_in, 64);
  void** op = n_out <= 64 ? out_ptrs : kiln_allocator_alloc(NULL, sizeof(void*) * (size_t)n_out, 64);
  unsigned char* allocated = n_out <= 64 ? alloc_flags : kiln_allocator_alloc(NULL, (size_t)n_out, 64);
  if (allocated && allocated != alloc_flags) memset(allocated, 0, (size_t)n_out);
  if (st == KILN_OK && (!ip || !op || !allocated))
    st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_run: out of memory");
  for (int i = 0; i < n_in && st == KILN_OK; i++) ip[i] = inputs[i].data;
  for (int k = 0; k < n_out && st == KILN_OK; k++) {
    int dt, nd;
    int64_t shape[KILN_MAX_DIMS];
    st = kiln_exec_output_info(e, k, &dt, &nd, shape);
    if (st != KILN_OK) break;
    kiln_tensor_t* o = &outputs[k];
    if (o->data) {
      int same = (int)o->dtype == dt && o->ndim == nd;
      for (int d = 0; same && d < nd; d++) same = o->shape[d] == shape[d];
      if (!same) {
        st = BADARG("kiln_model_run: output %d (%s) was given with another dtype or shape than "
                    "the result's", k, m->outs[k].name);
        break;
      }
    } else {
      int64_t nbytes = 0;
      if (!kiln_nbytes(shape, nd, kiln_dtype_size((kiln_dtype_t)dt), &nbytes)) {
        st = kiln_error(KILN_ERROR_INTERNAL, "kiln_model_run: output %d: bad shape", k);
        break;
      }
      void* p = kiln_allocator_alloc(NULL, nbytes ? (size_t)nbytes : 1, GX_ALIGN);
      if (!p) {
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_run: out of memory for output %d", k);
        break;
      }
      kiln_tensor_init_contiguous(o, p, (kiln_dtype_t)dt, nd, shape);
      allocated[k] = 1;
    }
    op[k] = o->data;
  }
  void* ws = NULL;
  int64_t ws_bytes = kiln_exec_workspace_size(e);
  if (st == KILN_OK && ws_bytes > 0) st = kiln_device_alloc(m->dev, (size_t)ws_bytes, &ws);
  if (st == KILN_OK) st = run_spec(m, &sp, n_in, ip, n_out, op, ws, ws_bytes);
  if (ws) kiln_device_free(m->dev, ws);
  if (st != KILN_OK && allocated)
    for (int k = 0; k < n_out; k++)
      if (allocated[k]) {
        kiln_allocator_free(NULL, outputs[k].data);
        outputs[k].data = NULL;
      }
  if (allocated && allocated != alloc_flags) kiln_allocator_free(NULL, allocated);
  if (ip && ip != in_ptrs) kiln_allocator_free(NULL, ip);
  if (op && op != out_ptrs) kiln_allocator_free(NULL, op);
  release_spec(m, &sp, temp);
  return st;
}

void kiln_model_free_output(kiln_model_t* m, void* data) {
  (void)m;
  kiln_allocator_free(NULL, data);
}
