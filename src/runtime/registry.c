/* SPDX-License-Identifier: Apache-2.0 */
/* registry.c - device registries, driver lookup by name and the process-default registry. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/device.h"
#include "kiln/parallel.h"

struct kiln_registry {
  kiln_allocator_t host_allocator;
  int32_t count;
  kiln_device_t* devices[KILN_MAX_DEVICES];
};

kiln_status_t kiln_registry_create(const kiln_allocator_t* host_allocator, kiln_registry_t** out) {
  if (!out) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_registry_create: out is NULL");
  kiln_allocator_t a = host_allocator ? *host_allocator : kiln_allocator_system();
  kiln_registry_t* reg = kiln_allocator_alloc(&a, sizeof(*reg), 64);
  if (!reg) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_registry_create: out of host memory");
  memset(reg, 0, sizeof(*reg));
  reg->host_allocator = a;
  *out = reg;
  return KILN_OK;
}

void kiln_registry_destroy(kiln_registry_t* reg) {
  if (!reg) return;
  for (int32_t i = reg->count - 1; i >= 0; i--) {
    kiln_device_synchronize(reg->devices[i]);
    kiln_device_destroy(reg->devices[i]);
  }
  kiln_allocator_t a = reg->host_allocator;
  kiln_allocator_free(&a, reg);
}

kiln_status_t kiln_registry_add(kiln_registry_t* reg, kiln_device_t* dev, int32_t* out_index) {
  if (!reg || !dev) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_registry_add: NULL argument");
  KILN_RETURN_IF_ERROR(kiln_hal_validate(dev->vtable));
  if (reg->count >= KILN_MAX_DEVICES)
    return kiln_error(KILN_ERROR_FAILED_PRECONDITION, "kiln registry is full (%d devices)",
                      KILN_MAX_DEVICES);
  dev->index = reg->count;
  reg->devices[reg->count++] = dev;
  if (out_index) *out_index = dev->index;
  return KILN_OK;
}

int32_t kiln_registry_count(const kiln_registry_t* reg) { return reg ? reg->count : 0; }

kiln_status_t kiln_registry_get(const kiln_registry_t* reg, int32_t index, kiln_device_t** out_dev) {
  if (!reg || !out_dev) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_registry_get: NULL argument");
  if (index < 0 || index >= reg->count)
    return kiln_error(KILN_ERROR_NOT_FOUND, "kiln device index %d out of range: %d device(s) available",
                      (int)index, (int)reg->count);
  *out_dev = reg->devices[index];
  return KILN_OK;
}

kiln_status_t kiln_device_create_by_name(const char* driver, uint64_t memory_limit,
                                         const kiln_allocator_t* host_allocator,
                                         kiln_device_t** out_device) {
  if (!driver || !out_device)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_device_create_by_name: NULL argument");
  if (strcmp(driver, "cpu") == 0) {
    kiln_cpu_device_options_t opts = {sizeof(opts), memory_limit};
    return kiln_cpu_device_create(&opts, host_allocator, out_device);
  }
  if (strcmp(driver, "ref") == 0) return kiln_ref_device_create(memory_limit, host_allocator, out_device);
  return kiln_error(KILN_ERROR_NOT_FOUND, "unknown kiln driver '%s' (known: cpu, ref)", driver);
}

kiln_status_t kiln_parse_bytes(const char* text, uint64_t* out_bytes) {
  if (!text || !out_bytes) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_parse_bytes: NULL argument");
  const char* p = text;
  while (isspace((unsigned char)*p)) p++;
  if (!isdigit((unsigned char)*p) && *p != '.')
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "malformed byte count '%s'", text);
  char* end = NULL;
  double v = strtod(p, &end);
  if (end == p || !isfinite(v) || v < 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "malformed byte count '%s'", text);
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1024.0 * 1024; end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
  }
  if (toupper((unsigned char)*end) == 'B' || (mult != 1 && toupper((unsigned char)*end) == 'I')) {
    if (toupper((unsigned char)*end) == 'I') end++;
    if (toupper((unsigned char)*end) == 'B') end++;
  }
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "malformed byte count '%s'", text);
  double bytes = v * mult;
  if (bytes >= 18446744073709551615.0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "byte count '%s' too large", text);
  *out_bytes = (uint64_t)bytes;
  return KILN_OK;
}

/* ---- process-default registry ---------------------------------------------------------- */

static pthread_once_t g_default_once = PTHREAD_ONCE_INIT;
static kiln_registry_t* g_default;
static kiln_status_t g_default_status;
static char g_default_message[512];

static kiln_status_t build_default(kiln_registry_t** out) {
  uint64_t limit = 0;
  const char* lim = getenv("KILN_MEMORY_LIMIT");
  if (lim && *lim) {
    kiln_status_t s = kiln_parse_bytes(lim, &limit);
    if (s != KILN_OK) {
      char msg[512];
      strncpy(msg, kiln_status_message(), sizeof(msg) - 1);
      msg[sizeof(msg) - 1] = '\0';
      return kiln_error((kiln_status_code_t)s, "KILN_MEMORY_LIMIT: %s", msg);
    }
  }
  const char* list = getenv("KILN_DEVICES");
  if (!list || !*list) list = "cpu";
  kiln_registry_t* reg = NULL;
  KILN_RETURN_IF_ERROR(kiln_registry_create(NULL, &reg));
  char name[32];
  const char* p = list;
  while (*p) {
    size_t n = strcspn(p, ",");
    while (n > 0 && isspace((unsigned char)*p)) { p++; n--; }
    size_t m = n;
    while (m > 0 && isspace((unsigned char)p[m - 1])) m--;
    if (m == 0 || m >= sizeof(name)) {
      kiln_registry_destroy(reg);
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "KILN_DEVICES='%s': empty or overlong entry", list);
    }
    memcpy(name, p, m);
    name[m] = '\0';
    kiln_device_t* dev = NULL;
    kiln_status_t s = kiln_device_create_by_name(name, limit, NULL, &dev);
    if (s == KILN_OK) {
      s = kiln_registry_add(reg, dev, NULL);
      if (s != KILN_OK) kiln_device_destroy(dev);
    }
    if (s != KILN_OK) {
      kiln_status_t code = s;
      char msg[512];
      strncpy(msg, kiln_status_message(), sizeof(msg) - 1);
      msg[sizeof(msg) - 1] = '\0';
      kiln_registry_destroy(reg);
      return kiln_error((kiln_status_code_t)code, "KILN_DEVICES='%s': %s", list, msg);
    }
    p += n;
    if (*p == ',') p++;
  }
  *out = reg;
  return KILN_OK;
}

static void init_default(void) {
  g_default_status = build_default(&g_default);
  if (g_default_status != KILN_OK) {
    strncpy(g_default_message, kiln_status_message(), sizeof(g_default_message) - 1);
  }
}

kiln_status_t kiln_registry_default(kiln_registry_t** out) {
  if (!out) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_registry_default: out is NULL");
  pthread_once(&g_default_once, init_default);
  if (g_default_status != KILN_OK)
    return kiln_error((kiln_status_code_t)g_default_status, "%s", g_default_message);
  *out = g_default;
  return KILN_OK;
}
