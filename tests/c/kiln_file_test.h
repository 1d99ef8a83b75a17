/* SPDX-License-Identifier: Apache-2.0 */
/* kiln_file_test.h - the .kiln header checksum, for tests and fuzz harnesses that write or
 * repair files. serialize.c is the definition; this is the tests' independent copy of the rule:
 * FNV-1a-64 over the payload (version 1), or over header bytes [8, 24) (version, flags, payload
 * size) and then the payload (version 2 and later). The header is 32 bytes, little endian. */
#ifndef KILN_FILE_TEST_H
#define KILN_FILE_TEST_H

#include <stddef.h>
#include <stdint.h>

#define KFT_HEADER_BYTES 32
#define KFT_FNV_SEED 0xcbf29ce484222325ull

static inline uint64_t kft_fnv1a(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static inline void kft_put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The checksum of an n-byte file (n >= KFT_HEADER_BYTES) for the version its header names. */
static inline uint64_t kft_checksum(const unsigned char* file, size_t n) {
  uint32_t version = (uint32_t)file[8] | (uint32_t)file[9] << 8 | (uint32_t)file[10] << 16 |
                     (uint32_t)file[11] << 24;
  uint64_t h = version == 1 ? KFT_FNV_SEED : kft_fnv1a(KFT_FNV_SEED, file + 8, 16);
  return kft_fnv1a(h, file + KFT_HEADER_BYTES, n - KFT_HEADER_BYTES);
}

/* Rewrites the checksum field (bytes [24, 32)) of an n-byte file to match its contents. */
static inline void kft_fix_checksum(unsigned char* file, size_t n) {
  kft_put_u64(file + 24, kft_checksum(file, n));
}

#endif /* KILN_FILE_TEST_H */
