/* SPDX-License-Identifier: Apache-2.0 */
/* kiln_file_test.h - the .kiln header checksum, for tests and fuzz harnesses that write or
 * repair files. serialize.c is the definition; this is the tests' independent copy of the rule:
 *   version 1: a 32-byte header, FNV-1a-64 over the payload;
 *   version 2: a 32-byte header, FNV-1a-64 over header bytes [8, 24) then the payload;
 *   version 3: a 64-byte header (u64 file bytes at 16, the checksum at 24), hash64 (a word-wise
 *              multiply-xorshift, below) over bytes [8, 24) and [32, end); size % 8 == 0.
 * Little endian throughout. */
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

#define KFT_HEADER_BYTES_V3 64

static inline uint32_t kft_version(const unsigned char* file) {
  return (uint32_t)file[8] | (uint32_t)file[9] << 8 | (uint32_t)file[10] << 16 |
         (uint32_t)file[11] << 24;
}

static inline uint64_t kft_hash64(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t w = 0;
    for (int k = 7; k >= 0; k--) w = w << 8 | p[i + (size_t)k];
    h ^= w;
    h *= 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  }
  return h;
}

/* The checksum of an n-byte file (n >= its header) for the version its header names. */
static inline uint64_t kft_checksum(const unsigned char* file, size_t n) {
  uint32_t version = kft_version(file);
  if (version >= 3) {
    uint64_t h = kft_hash64(0x6b696c6e2d763333ull, file + 8, 16);
    h = kft_hash64(h, file + 32, n - 32);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
  }
  uint64_t h = version == 1 ? KFT_FNV_SEED : kft_fnv1a(KFT_FNV_SEED, file + 8, 16);
  return kft_fnv1a(h, file + KFT_HEADER_BYTES, n - KFT_HEADER_BYTES);
}

/* Rewrites the checksum field (bytes [24, 32)) of an n-byte file to match its contents. */
static inline void kft_fix_checksum(unsigned char* file, size_t n) {
  kft_put_u64(file + 24, kft_checksum(file, n));
}

/* Makes the size field and the checksum of an n-byte file agree with its contents (v1/v2: the
 * payload length at 16; v3: the file length at 16). 0 when n cannot hold the header. */
static inline int kft_repair(unsigned char* file, size_t n) {
  if (n < KFT_HEADER_BYTES) return 0;
  if (kft_version(file) >= 3) {
    if (n < KFT_HEADER_BYTES_V3 || n % 8) return 0;
    kft_put_u64(file + 16, (uint64_t)n);
  } else {
    kft_put_u64(file + 16, (uint64_t)(n - KFT_HEADER_BYTES));
  }
  kft_fix_checksum(file, n);
  return 1;
}

#endif /* KILN_FILE_TEST_H */
