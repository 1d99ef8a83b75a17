/* SPDX-License-Identifier: Apache-2.0 */
/* graph_internal.h - the IR, the compiled program and the passes of the graph compiler.
 *
 * IR: a graph is an array of nodes and an array of values. Every value is produced by exactly
 * one node (inputs and constants are nodes too) and nodes only reference values created before
 * them, so creation order is a topological order of the graph as built. Passes work on a
 * private copy (the "working graph"): they mark nodes dead, append new nodes and rewire inputs;
 * from the view pass on the execution order is an explicit list of node ids.
 * Internal to libkiln.
 */
#ifndef KILN_GRAPH_INTERNAL_H
#define KILN_GRAPH_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ew_internal.h"
#include "kiln/graph.h"
#include "kiln/tensor.h"

/* ---- ops ------------------------------------------------------------------------------------
 * Numeric values are part of the .kiln format: append only. Attribute slots per op are listed in
 * infer.c (gx_add). */
enum {
  GX_OP_INPUT = 0,
  GX_OP_CONST,
  GX_OP_UNARY,
  GX_OP_BINARY,
  GX_OP_TERNARY,
  GX_OP_CAST,
  GX_OP_REDUCE,
  GX_OP_REDUCE_INDEX,
  GX_OP_SCAN,
  GX_OP_MATMUL,
  GX_OP_ADDMM,
  GX_OP_RESHAPE,
  GX_OP_PERMUTE,
  GX_OP_EXPAND,
  GX_OP_SLICE,
  GX_OP_CONTIGUOUS,
  GX_OP_CAT,
  GX_OP_SOFTMAX,
  GX_OP_SOFTMAX_BW,
  GX_OP_LAYER_NORM,
  GX_OP_LAYER_NORM_BW,
  GX_OP_RMS_NORM,
  GX_OP_RMS_NORM_BW,
  GX_OP_EMBEDDING,
  GX_OP_EMBEDDING_BW,
  GX_OP_NLL_LOSS,
  GX_OP_NLL_LOSS_BW,
  GX_OP_SDPA,
  GX_OP_SDPA_BW,
  GX_OP_CONV,
  GX_OP_CONV_BW,
  GX_OP_MAX_POOL,
  GX_OP_MAX_POOL_BW,
  GX_OP_AVG_POOL,
  GX_OP_AVG_POOL_BW,
  GX_OP_ADAPTIVE_POOL,
  GX_OP_ADAPTIVE_POOL_BW,
  GX_OP_GATHER,
  GX_OP_INDEX_SELECT,
  GX_OP_SCATTER,
  GX_OP_INDEX,
  GX_OP_INDEX_PUT,
  GX_OP_ARANGE, /* i[0] length; integer dtypes: sub 1, i[1] start, i[2] step; else f[0], f[1] */
  GX_OP_BUILD_COUNT, /* ops below are made by the compiler only, never serialized */
  GX_OP_FUSED = 100, /* a fused pointwise group; aux = group index */
  GX_OP_GEMM,        /* f32 GEMM with epilogue: in a, b, bias, residual[, stacked weights W_i
                        (then b is -1)]; i[0] act, i[1] axis (see exec.c) */
};

#define GX_MAX_I 16
#define GX_MAX_F 8
#define GX_MAX_OUT 3
#define GX_ALIGN 64

/* A request to add a node: filled by the builder functions and by the loader. */
typedef struct gx_spec {
  int op, sub, dtype, dtype2;
  int n_in;
  const int* in; /* value ids, -1 = absent optional input */
  int n_i;
  int64_t i[GX_MAX_I];
  double f[GX_MAX_F];
  const void* data; /* CONST: contiguous bytes (copied unless borrow) */
  size_t data_bytes;
  int borrow;       /* CONST: keep `data` as is (the caller keeps it alive and 64-byte aligned) */
} gx_spec;

typedef struct gx_node {
  int op, sub, dtype, dtype2;
  int n_in;
  int* in; /* owned */
  int n_i;
  int64_t i[GX_MAX_I];
  double f[GX_MAX_F];
  int n_out;
  int out[GX_MAX_OUT]; /* value ids, -1 = absent */
  void* data;          /* CONST data */
  size_t data_bytes;
  int owns_data;
  int dead;
  int aux; /* FUSED: group index; CAT: 1 when elided (inputs are windows of the output) */
} gx_node;

typedef struct gx_value {
  int dtype, ndim;
  int64_t shape[KILN_MAX_DIMS];
  int64_t numel;
  int node, slot; /* producer and its output slot */
  int wrapped;    /* a kiln_graph_scalar: lowest priority in type promotion */
  /* layout (set by gx_layout_value): a strided window of value `root`, offset in elements */
  int has_layout;
  int root;
  int64_t offset;
  int64_t strides[KILN_MAX_DIMS];
} gx_value;

struct kiln_graph {
  kiln_allocator_t alloc;
  gx_node* nodes;
  int n_nodes, cap_nodes;
  gx_value* values;
  int n_values, cap_values;
  int* inputs; /* value ids by input index */
  int n_inputs, cap_inputs;
  int* outputs; /* value ids by output index */
  int n_outputs, cap_outputs;
};

/* ---- memory helpers (graph.c) --------------------------------------------------------------- */
void* gx_alloc(const kiln_allocator_t* a, size_t bytes);
void* gx_calloc(const kiln_allocator_t* a, size_t n, size_t size);
void gx_free(const kiln_allocator_t* a, void* p);
/* Grows *arr (elements of `size`) to hold at least `need`; OUT_OF_MEMORY on failure. */
kiln_status_t gx_grow(const kiln_allocator_t* a, void** arr, int* cap, int need, size_t size);

/* ---- graph helpers (graph.c) ---------------------------------------------------------------- */
kiln_status_t gx_graph_new(const kiln_allocator_t* a, kiln_graph_t** out);
/* Deep copy; share_data != 0 makes CONST nodes borrow src's data (src must outlive the copy). */
kiln_status_t gx_graph_copy(const kiln_graph_t* src, int share_data, kiln_graph_t** out);
/* Appends a node with n_in inputs and n_out output slots; slot k gets a fresh value (shape to be
 * set by the caller) when bit k of `present` is set, else -1. Returns the node id; value ids land
 * in node->out. Keeps the graph unchanged on OUT_OF_MEMORY. */
kiln_status_t gx_new_node(kiln_graph_t* g, int op, int n_in, const int* in, int n_out,
                          unsigned present, int* out_node);
/* Removes the last node and its values (used to undo a failed builder call). */
void gx_pop_node(kiln_graph_t* g);
int gx_valid_vid(const kiln_graph_t* g, int vid);
int gx_valid_dtype(int dtype);
int64_t gx_numel(const int64_t* shape, int ndim);
void gx_contig_strides(const int64_t* shape, int ndim, int64_t* strides);
int gx_is_identity(const gx_value* v, const gx_value* root);
/* "[2, 3]" into buf (>= 200 bytes). */
const char* gx_fmt_shape(char* buf, const int64_t* shape, int ndim);
const char* gx_op_name(int op);
const char* gx_sub_name(int op, int sub);
/* torch.promote_types and torch.result_type over values (wrapped numbers, 0-dim, dim tensors). */
int gx_promote(int a, int b);
int gx_result_type(const kiln_graph_t* g, const int* vids, int n);
/* Numpy broadcast of two shapes into out (returns 0 if they do not broadcast). */
int gx_broadcast(const int64_t* a, int na, const int64_t* b, int nb, int64_t* out, int* nout);
/* 1 if shape a broadcasts to shape b. */
int gx_broadcasts_to(const int64_t* a, int na, const int64_t* b, int nb);
/* 1 for the pointwise ops the fuser handles. */
int gx_is_pointwise(int op);
int gx_is_view(int op);

/* ---- node validation (validate.c) ------------------------------------------------------------ */
/* The structural checks run on every node request (builder API and loader alike) before any
 * inference reads it: a known op, an input count within the op's arity, every input id an
 * existing value (or -1 where the op allows an absent input), an attribute count <= GX_MAX_I.
 * Errors: INVALID_ARGUMENT naming the op. */
kiln_status_t gx_validate_spec(const kiln_graph_t* g, const gx_spec* s);

/* ---- builder core (infer.c) ----------------------------------------------------------------- */
/* Validates `s`, infers output dtypes/shapes, appends the node; out_vids[k] receives output k's
 * value id (-1 for an absent optional output). On error the graph is unchanged. */
kiln_status_t gx_add(kiln_graph_t* g, const gx_spec* s, int* out_vids);
/* Number of outputs an op produces. */
int gx_op_n_out(int op);

/* ---- layouts (layout.c) --------------------------------------------------------------------- */
/* Computes v's strided layout from its producer (views) or as its own root. Returns 1 on
 * success, 0 when v is a reshape that is not expressible as a view of its input's layout. The
 * producer's inputs must have layouts already. */
int gx_layout_value(kiln_graph_t* g, int vid);
/* torch's computeStride: strides for viewing (shape, strides) as new_shape; 0 if impossible. */
int gx_view_strides(const int64_t* shape, const int64_t* strides, int ndim,
                    const int64_t* new_shape, int new_ndim, int64_t* new_strides);

/* ---- compiled program ----------------------------------------------------------------------- */
enum { GX_ST_NONE = 0, GX_ST_INPUT, GX_ST_OUTPUT, GX_ST_CONST, GX_ST_ARENA };
enum { GX_STEP_NODE = 0, GX_STEP_COPY };
enum { GX_OPD_NONE = 0, GX_OPD_REG, GX_OPD_IN, GX_OPD_OUT };

typedef struct gx_opd {
  int kind, idx;
  int dtype; /* REG: the dtype of the value held (registers are reused across dtypes) */
} gx_opd;

typedef struct gx_instr {
  int op, sub, compute, dtype; /* op GX_OP_UNARY/BINARY/TERNARY/CAST; dtype of dst */
  double f[6];                 /* unary params / binary alpha / ternary scalar in f[0] */
  int has_min, has_max;
  int node;                    /* the IR node it came from (dump) */
  gx_opd dst;
  gx_opd src[3];
  /* direct path (gx_group_prepare): the element kernel and its arguments, run on contiguous
   * tile buffers already in the kernel's types; NULL kfn for a cast (kiln_cvt) */
  kiln_ew_kernel_t kfn;
  kiln_ew_args_t kargs;
} gx_instr;

typedef struct gx_group {
  int node; /* the GX_OP_FUSED node */
  int n_instr;
  gx_instr* instr;
  int n_regs;
  int* reg_dtype; /* dtype of each register's last value (compile-time bookkeeping only) */
  int n_in, n_out;
  int* in_vids;  /* external inputs */
  int* out_vids; /* values written over the whole iteration space, then red_out_vid */
  int* members;  /* IR nodes fused (dump) */
  int n_members;
  /* fused reduction (has_reduce): reduce `red_src` (a register or external opd) */
  int has_reduce;
  int red_op, red_compute, red_node, red_out_vid;
  double red_f[2];
  gx_opd red_src;
  /* iteration space after collapsing; strides are in elements per operand */
  int iter_ndim;        /* original (uncollapsed) iteration rank, for the dump */
  int64_t iter_shape[KILN_MAX_DIMS];
  int ndim, n_outer;    /* collapsed rank; dims [n_outer, ndim) are reduced */
  int64_t shape[KILN_MAX_DIMS];
  int64_t (*in_st)[KILN_MAX_DIMS];
  int64_t (*out_st)[KILN_MAX_DIMS];
  int64_t red_st[KILN_MAX_DIMS];
  int tile_dim;         /* dims < tile_dim are single indices, tile_dim is chunked */
  int64_t chunk, n_chunks, n_tiles, reg_elems;
  /* 1 when every instruction runs its element kernel directly on contiguous tile buffers
   * (operands already in the kernel's types): strided / broadcast inputs are gathered once per
   * tile and strided outputs scattered once, instead of one strided kernel call per instruction.
   * Uses n_regs + n_in + n_out scratch slots per thread. */
  int direct;
  signed char in_type[48]; /* direct path: dtype each input is presented in (converted if not
                              its own), for n_in <= 48 */
} gx_group;

typedef struct gx_step {
  int kind; /* GX_STEP_NODE: run node `node`; GX_STEP_COPY: value `src` -> output `out` */
  int node;
  int src, out;
  /* tile chains (plan.c): chain > 1 heads `chain` consecutive fused-group steps that run row
   * tile by row tile in one parallel job (chain_rows rows per tile); 0 marks the steps it runs,
   * 1 a step on its own */
  int chain;
  int64_t chain_rows;
} gx_step;

typedef struct gx_buffer {
  int root;       /* first value placed in it */
  int64_t bytes;  /* 64-byte rounded */
  int first, last; /* step range where it is live */
  int64_t offset;
  int n_shared;   /* values sharing it through in-place reuse */
} gx_buffer;

/* The mutable state of one run (runctx.c): the exec itself is read only while it runs, so any
 * number of threads may run it at once, each on a context of its own. */
typedef struct gx_run {
  struct gx_run* next;  /* the exec's free list */
  const kiln_exec_t* e;
  kiln_tensor_t* vt;    /* per-value descriptors: the exec's, data bound to this run's buffers */
  kiln_tensor_t* out_t; /* per-output contiguous descriptors (data = the caller's buffer) */
  char* bound_arena;    /* the arena the arena values of vt point into (NULL = none yet) */
  char* own_arena;      /* kiln_exec_run's arena on this context, allocated on first use */
  char* scratch;        /* interpreter scratch: e->n_threads blocks of e->scratch_per_thread */
  atomic_int err;       /* first error raised inside a parallel interpreter job of this run */
  char err_msg[512];
} gx_run;

struct kiln_exec {
  kiln_allocator_t alloc;
  int flags;
  kiln_graph_t* src; /* the graph as given (owns constant data) */
  kiln_graph_t* wg;  /* the optimized graph */
  int* order;        /* execution order of live compute nodes */
  int n_order;
  gx_step* steps;
  int n_steps;
  gx_group* groups;
  int n_groups, cap_groups;
  /* storage per value (of its root): class, index (input/output number or buffer) */
  int* st_cls;
  int* st_idx;
  int* v_used;       /* 1 if a step reads or writes the value */
  kiln_tensor_t* vt; /* per-value descriptors as planned (constants bound, the rest unbound);
                      * each run context starts from a copy */
  kiln_tensor_t* out_t; /* per-output contiguous descriptors (data unbound), likewise */
  gx_buffer* bufs;
  int n_bufs;
  int64_t arena_bytes; /* bytes of intermediates per run (kiln_exec_workspace_size) */
  int64_t* arena_off;  /* per arena value: byte offset of its data in the arena */
  int64_t scratch_per_thread;
  int n_threads;
  kiln_exec_stats_t stats;
  /* per-step wall time (ns, summed over runs) while prof_on (kiln_exec_set_profiling); allocated
   * by the first enable, kept until destroy so runs in flight never see it freed */
  atomic_llong* prof_ns;
  atomic_int prof_on;
  /* Written by every run: on a cache line of their own, so concurrent runs do not bounce the
   * read-only fields above between cores. Run contexts not in use (runctx.c), guarded by
   * run_lock; grown when runs overlap. */
  _Alignas(64) atomic_flag run_lock;
  gx_run* free_runs;
  atomic_llong prof_runs;
  /* (the last fields: the struct's 64-byte alignment pads the line) */
};

/* ---- passes (passes.c, fusion.c, plan.c) ---------------------------------------------------- */
/* Topological order (DFS post-order from the outputs) of the live nodes reachable from outputs;
 * *order is allocated with g's allocator. */
kiln_status_t gx_topo_order(const kiln_graph_t* g, int** order, int* n);
/* Use counts per value over the live nodes in `order` plus graph outputs (uses has n_values). */
void gx_count_uses(const kiln_graph_t* g, const int* order, int n, int* uses);
void gx_replace_uses(kiln_graph_t* g, int old_vid, int new_vid);
kiln_status_t gx_pass_dce(kiln_graph_t* g, int64_t* removed);
kiln_status_t gx_pass_cse(kiln_graph_t* g, int64_t* merged);
kiln_status_t gx_pass_fold(kiln_graph_t* g, int64_t* folded);
kiln_status_t gx_pass_view_sink(kiln_graph_t* g, int64_t* moved);
/* Rewrites f32 mul(x, sigmoid(x)) (a decomposed silu; the sigmoid used only there) into
 * unary silu(x); the sigmoid is left for DCE. *rewritten counts the rewrites. */
kiln_status_t gx_pass_peephole(kiln_graph_t* g, int64_t* rewritten);
/* Horizontal GEMM fusion (hfuse.c): f32 matmuls sharing A with weight B's become one matmul
 * against the stacked weights; the old results become column slices. Graph level, before the
 * view pass; *merged counts the matmuls merged. */
kiln_status_t gx_pass_hfuse(kiln_graph_t* g, int64_t* merged);
/* Computes layouts for every live value in order, inserting contiguous copies for reshapes
 * that cannot be views; rewrites e->order. */
kiln_status_t gx_pass_views(kiln_exec_t* e);
kiln_status_t gx_pass_epilogue(kiln_exec_t* e);
kiln_status_t gx_pass_fusion(kiln_exec_t* e);
/* Cat elision (cat.c): a cat whose inputs are (reshapes of) single-use pointwise results makes
 * those results windows of its output and is marked elided (no step). Run after the epilogue
 * pass, before fusion. */
kiln_status_t gx_pass_cat(kiln_exec_t* e);
/* 1 for a cat or contiguous node whose inputs were laid out inside its result (cat.c): no step. */
int gx_cat_elided(const gx_node* n);
/* The non-view value x is a (chain of) view(s) of; x itself when it is not a view. */
int gx_view_source(const kiln_graph_t* g, int x);
/* Builds steps, storage, in-place reuse and the arena plan. */
kiln_status_t gx_plan(kiln_exec_t* e);

/* ---- execution (exec.c, interp.c) ----------------------------------------------------------- */
/* Runs one non-fused node on resolved descriptors: ins[j] for input j (NULL when absent),
 * outs[k] for output k (NULL = not wanted, where the kernel allows it). */
kiln_status_t gx_run_node(const kiln_graph_t* g, const gx_node* n, kiln_tensor_t* const* ins,
                          kiln_tensor_t* const* outs);
/* 1 if output slot k of op may be skipped (NULL) by its kernel. */
int gx_out_optional(int op, int slot);
/* Run contexts (runctx.c). gx_run_acquire takes a free context or makes one (NULL with an
 * OUT_OF_MEMORY status set); gx_run_release gives it back; gx_run_free_all frees the free list
 * (destroy: no run may be in flight). */
gx_run* gx_run_acquire(kiln_exec_t* e);
void gx_run_release(kiln_exec_t* e, gx_run* r);
void gx_run_free_all(kiln_exec_t* e);
/* Takes / drops the exec's run_lock (a spinlock over a few pointer moves). */
void gx_exec_lock(kiln_exec_t* e);
void gx_exec_unlock(kiln_exec_t* e);
kiln_status_t gx_run_group(gx_run* r, const gx_group* grp);
#define GX_CHAIN_MAX 8 /* groups in one tile chain */
/* Runs n groups (a tile chain, plan.c: tile_dim 0, the same number of rows R, chunks >= rows)
 * row tile by row tile: every group's part for rows [r, r + rows) before the next tile's. */
kiln_status_t gx_run_chain(gx_run* r, const gx_group* const* grs, int n, int64_t rows);
/* Builds the tiling of a group after its operands are known (interp.c). */
void gx_group_tiling(gx_group* grp);
/* Decides whether a tiled group takes the direct path and fills each instruction's kernel
 * (interp.c). g holds the group's values. */
void gx_group_prepare(const kiln_graph_t* g, gx_group* grp);
/* Scratch bytes one thread needs for a prepared group. */
int64_t gx_group_scratch(const gx_group* grp);


/* ---- .kiln files (serialize.c) -------------------------------------------------------------- */
/* Compiles g (kiln_graph_compile_ex); share_constants != 0 makes the program borrow g's
 * constant data instead of copying it (the data must outlive the exec). */
kiln_status_t gx_compile(const kiln_graph_t* g, int flags, int share_constants, kiln_exec_t** out);

/* One node as read from a file: attributes before the dynamic sizes are substituted. */
typedef struct gx_fnode {
  int op, sub, dtype, dtype2, n_in, n_i;
  int* in; /* into gx_file.ins */
  int64_t i[GX_MAX_I];
  double f[GX_MAX_F];
  const void* data; /* CONST: into the file's bytes */
  size_t data_bytes;
  int first_bind, n_bind; /* this node's entries of gx_file.bind_* */
} gx_fnode;

/* A parsed .kiln file (any version). Its pointers point into the file's bytes, which must
 * outlive it; everything else is owned (gx_file_free). */
typedef struct gx_file {
  uint32_t version;
  int flags;
  int n_nodes;
  gx_fnode* nodes;
  int* ins;
  int n_outputs;
  int* outputs;
  uint32_t n_values;
  int n_inputs;
  int64_t summary[4]; /* plan at the reference sizes: arena, kernels, nodes after, groups */
  int n_symbols;
  char** sym_names;
  int64_t* sym_min;
  int64_t* sym_max;
  int* sym_input; /* where a run reads each symbol: input index and dim */
  int* sym_dim;
  int n_exprs;
  int64_t* expr_code;
  int* expr_off;
  int* expr_len;
  int n_binds;
  int* bind_slot; /* attribute index i[slot] of the owning node */
  int* bind_expr;
  char** input_names; /* n_inputs */
  char** output_names; /* n_outputs */
  char* names; /* storage of every name */
  uint64_t file_bytes, weight_bytes;
} gx_file;

/* Parses and checks a file's bytes (header, checksum, every count and offset). DATA_LOSS on
 * anything unexpected, OUT_OF_MEMORY. The caller owns *out. */
kiln_status_t gx_file_parse(const unsigned char* data, size_t size, gx_file** out);
void gx_file_free(gx_file* f);
/* Rebuilds the program with symbol values `syms` (n_symbols of them; NULL when none) through
 * the builder's validation. borrow != 0: constants point into the file's bytes (which must be
 * 64-byte aligned and outlive the graph). A node the builder rejects is DATA_LOSS when
 * from_file, else INVALID_ARGUMENT (sizes the program does not admit). */
kiln_status_t gx_file_instantiate(const gx_file* f, const int64_t* syms, int borrow, int from_file,
                                  kiln_graph_t** out);
/* Reads a whole file into memory from kiln_allocator_alloc (the caller frees it). NOT_FOUND,
 * OUT_OF_MEMORY, INTERNAL (read error); `what` prefixes the messages. */
kiln_status_t gx_read_file(const char* path, unsigned char** out_data, size_t* out_len,
                           const char* what);
/* Evaluates a postfix size expression (kiln/model.h). INVALID_ARGUMENT on a malformed program,
 * a zero divisor or an overflow. */
kiln_status_t gx_expr_eval(const int64_t* code, int len, const int64_t* syms, int n_syms,
                           int64_t* out);

#endif /* KILN_GRAPH_INTERNAL_H */
