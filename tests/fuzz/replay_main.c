/* SPDX-License-Identifier: Apache-2.0 */
/* replay_main.c - runs a fuzz harness over files without libFuzzer (any compiler): each
 * argument is a file or a directory whose regular files are fed, one by one, to
 * LLVMFuzzerTestOneInput. A harness failure aborts (as under libFuzzer); the exit status is
 * non-zero when an argument cannot be read or no file was run at all. The ctest of the
 * committed corpora and regressions. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

static int run_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 0;
  }
  size_t cap = 1 << 16, len = 0;
  unsigned char* buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
    if (len == cap) {
      unsigned char* q = realloc(buf, cap *= 2);
      if (!q) free(buf);
      buf = q;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf || err) {
    free(buf);
    fprintf(stderr, "replay: cannot read %s\n", path);
    return 0;
  }
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 1;
}

static int by_name(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* Runs every regular file in dir, in name order; returns the count, -1 on an error. */
static int run_dir(const char* dir) {
  DIR* dp = opendir(dir);
  if (!dp) return -1;
  char** names = NULL;
  int n = 0, cap = 0, bad = 0;
  for (struct dirent* de; (de = readdir(dp)) != NULL;) {
    if (de->d_name[0] == '.') continue;
    size_t len = strlen(dir) + strlen(de->d_name) + 2;
    char* p = malloc(len);
    if (!p) {
      bad = 1;
      break;
    }
    snprintf(p, len, "%s/%s", dir, de->d_name);
    struct stat sb;
    if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      free(p);
      continue;
    }
    if (n == cap) {
      char** q = realloc(names, sizeof(char*) * (size_t)(cap = cap ? cap * 2 : 64));
      if (!q) {
        free(p);
        bad = 1;
        break;
      }
      names = q;
    }
    names[n++] = p;
  }
  closedir(dp);
  if (n) qsort(names, (size_t)n, sizeof(char*), by_name);
  int ran = 0;
  for (int i = 0; i < n; i++) {
    if (!bad && run_file(names[i])) ran++;
    else bad = 1;
    free(names[i]);
  }
  free(names);
  return bad ? -1 : ran;
}

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  int total = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      return 1;
    }
    int n = S_ISDIR(sb.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
    if (n < 0 || (!S_ISDIR(sb.st_mode) && n == 0)) return 1;
    printf("replay: %s: %d input(s)\n", argv[i], n);
    total += n;
  }
  if (total == 0) {
    fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  printf("replay: %d input(s) ran clean\n", total);
  return 0;
}
