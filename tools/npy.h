/* SPDX-License-Identifier: Apache-2.0 */
/* npy.h - reading and writing NumPy .npy files (one array per file) for the Kiln tools.
 *
 * Self-contained: it uses only the enum values of kiln/dtype.h and kiln/status.h, never a
 * libkiln function, so it can be compiled into a tool or a test without the library.
 *
 *   kiln_npy_t a; char err[256];
 *   if (kiln_npy_read("x.npy", &a, err, sizeof err) != KILN_OK) { puts(err); ... }
 *   ... a.dtype, a.ndim, a.shape, a.data (a.nbytes bytes, C order) ...
 *   kiln_npy_free(&a);
 *
 * Accepted on read: format versions 1.0, 2.0 and 3.0; a header that is a Python dict literal
 * with exactly the keys 'descr', 'fortran_order' and 'shape' (any order, single or double
 * quotes, an optional trailing comma), as numpy writes it. Element types (descr -> kiln dtype):
 *   '<f4' F32   '<f2' F16   '<f8' F64   '<i8' I64   '<i4' I32   '<i2' I16
 *   '|i1' I8    '|u1' U8    '|b1' BOOL  (one-byte types also as '<' or '=')
 *   '<V2', '|V2' or 'bfloat16'  BF16 (numpy has no bfloat16: np.save of an ml_dtypes.bfloat16
 *               array writes '<V2'; the two bytes are taken as bfloat16 bits, little-endian)
 * A bool element that is neither 0 nor 1 is read as 1 (numpy's truth). Rejected, each with a
 * message in `err`: fortran_order True, big-endian ('>') or other unsupported descrs
 * (structured, unicode, object, u2/u4/u8, complex, ...), more than KILN_NPY_MAX_DIMS dims,
 * negative dims, a shape whose byte size overflows, a header longer than KILN_NPY_MAX_HEADER or
 * than the file, a data section shorter or longer than the shape says. The data size is checked
 * against the file size before anything is allocated, so a hostile file never causes a large
 * allocation.
 *
 * Written: format version 1.0 (2.0 if the header would not fit, which cannot happen with 8
 * dims), little-endian descrs from the table above, the header padded with spaces and ended
 * by '\n' so that the data starts at a multiple of 64 bytes, byte for byte what numpy 2's
 * np.save writes for the same array. BF16 is written as '<V2': np.load returns a void array
 * of 2-byte elements, which `.view(ml_dtypes.bfloat16)` (or `.view(np.uint16)` for the raw
 * bits) turns back into values; torch: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).
 */
#ifndef KILN_TOOLS_NPY_H
#define KILN_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_NPY_MAX_DIMS KILN_MAX_DIMS
/* The longest header accepted on read (numpy's np.load refuses more than 10000 by default). */
#define KILN_NPY_MAX_HEADER 65536

typedef struct kiln_npy {
  int dtype;                        /* kiln_dtype_t */
  int ndim;                         /* 0 (a scalar) .. KILN_NPY_MAX_DIMS */
  int64_t shape[KILN_NPY_MAX_DIMS]; /* entries past ndim are 0 */
  void* data;    /* owned: C-order elements, nbytes long; never NULL after a successful read */
  size_t nbytes; /* numel * element size (0 for an array with a zero dim) */
} kiln_npy_t;

/* Reads the .npy file at `path` into *out (the caller frees it with kiln_npy_free). Returns
 * KILN_OK, or an error code with a message in err (NUL-terminated, truncated to errcap; err may
 * be NULL when errcap is 0) and *out zeroed: NOT_FOUND (cannot open), DATA_LOSS (not a .npy
 * file, malformed header, size mismatch), UNIMPLEMENTED (a valid .npy this reader does not
 * take: big-endian, fortran order, an unsupported descr), INVALID_ARGUMENT (NULL out or path),
 * OUT_OF_MEMORY, INTERNAL (a read error). The codes are kiln_status_code_t values, but this
 * function does not set kiln_status_message. */
int kiln_npy_read(const char* path, kiln_npy_t* out, char* err, size_t errcap);

/* kiln_npy_read from `size` bytes at `data` (copied; the buffer is not kept). */
int kiln_npy_read_buffer(const void* data, size_t size, kiln_npy_t* out, char* err,
                         size_t errcap);

/* Frees out->data and zeroes *out. NULL is a no-op. */
void kiln_npy_free(kiln_npy_t* a);

/* Writes a C-order array of `dtype` (any kiln dtype; the descrs of the table above) with
 * `ndim` dims `shape` from `data` (numel * element size bytes; may be NULL when that is 0) to
 * `path`, replacing it. Returns KILN_OK, or with a message in err: INVALID_ARGUMENT (bad dtype,
 * ndim, negative dim, size overflow, NULL data), INTERNAL (cannot create or write the file; a
 * partly written file is removed). */
int kiln_npy_write(const char* path, int dtype, int ndim, const int64_t* shape, const void* data,
                   char* err, size_t errcap);

/* The descr written for `dtype` ("<f4", ..., "<V2" for BF16); NULL for an invalid dtype. */
const char* kiln_npy_descr(int dtype);

#ifdef __cplusplus
}
#endif
#endif /* KILN_TOOLS_NPY_H */
