/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - libkiln from an installed package: open a kiln device, put two vectors in device
 * memory (a fill and a host-to-device copy), run a compiled graph y = relu(a * b - 1) over them,
 * copy y back and check it. Prints one line and exits 0 on success, 1 with the error otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "kiln/graph.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kiln.h"

#define N 8

static int fail(const char* what, kiln_status_t s) {
  fprintf(stderr, "kiln_example: %s: %s: %s\n", what, kiln_status_code_name(s), kiln_status_message());
  return 1;
}

#define CHECK(expr)                         \
  do {                                      \
    kiln_status_t s_ = (expr);              \
    if (s_ != KILN_OK) return fail(#expr, s_); \
  } while (0)

/* y = relu(a * b - 1) compiled for [N] f32 inputs. */
static kiln_status_t build_program(kiln_exec_t** out) {
  kiln_graph_t* g;
  int a, b, ab, one, d, y;
  int64_t shape[1] = {N};
  KILN_RETURN_IF_ERROR(kiln_graph_create(&g));
  kiln_status_t s = kiln_graph_input(g, KILN_DTYPE_F32, 1, shape, &a);
  if (s == KILN_OK) s = kiln_graph_input(g, KILN_DTYPE_F32, 1, shape, &b);
  if (s == KILN_OK) s = kiln_graph_binary(g, KILN_BINARY_MUL, a, b, 1.0, KILN_DTYPE_F32, &ab);
  if (s == KILN_OK) s = kiln_graph_scalar(g, 1.0, KILN_DTYPE_F32, &one);
  if (s == KILN_OK) s = kiln_graph_binary(g, KILN_BINARY_SUB, ab, one, 1.0, KILN_DTYPE_F32, &d);
  if (s == KILN_OK) s = kiln_graph_unary(g, KILN_UNARY_RELU, d, KILN_DTYPE_F32, &y);
  if (s == KILN_OK) s = kiln_graph_output(g, y);
  if (s == KILN_OK) s = kiln_graph_compile(g, out);
  kiln_graph_destroy(g);
  return s;
}

int main(void) {
  kiln_registry_t* reg;
  kiln_device_t* dev;
  kiln_device_props_t props;
  CHECK(kiln_registry_default(&reg));
  CHECK(kiln_registry_get(reg, 0, &dev));
  memset(&props, 0, sizeof(props));
  props.struct_size = sizeof(props);
  CHECK(kiln_device_props(dev, &props));
  if (!(props.capabilities & KILN_CAP_HOST_VISIBLE)) {
    fprintf(stderr, "kiln_example: device %s is not host visible\n", props.name);
    return 1;
  }

  float host_b[N], host_y[N];
  for (int i = 0; i < N; i++) host_b[i] = (float)i - 2.0f;
  const float two = 2.0f;
  void *a, *b, *y;
  CHECK(kiln_device_alloc(dev, sizeof(host_b), &a));
  CHECK(kiln_device_alloc(dev, sizeof(host_b), &b));
  CHECK(kiln_device_alloc(dev, sizeof(host_y), &y));
  CHECK(kiln_device_fill(dev, NULL, a, sizeof(host_b), &two, sizeof(two)));
  CHECK(kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, b, host_b, sizeof(host_b)));
  CHECK(kiln_device_synchronize(dev));

  kiln_exec_t* prog;
  CHECK(build_program(&prog));
  void* ins[2] = {a, b};
  void* outs[1] = {y};
  CHECK(kiln_exec_run(prog, 2, ins, 1, outs));
  CHECK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, host_y, y, sizeof(host_y)));
  CHECK(kiln_device_synchronize(dev));

  int bad = 0;
  for (int i = 0; i < N; i++) {
    float want = 2.0f * host_b[i] - 1.0f;
    if (want < 0.0f) want = 0.0f;
    if (host_y[i] != want) {
      fprintf(stderr, "kiln_example: y[%d] = %g, expected %g\n", i, (double)host_y[i], (double)want);
      bad = 1;
    }
  }
  kiln_exec_destroy(prog);
  kiln_device_free(dev, a);
  kiln_device_free(dev, b);
  kiln_device_free(dev, y);
  if (bad) return 1;
  printf("kiln %s on %s (%s, %s kernels): relu(a*b-1) = [%g %g %g %g ...] ok\n", kiln_version(),
         props.name, props.description, kiln_cpu_isa(), (double)host_y[0], (double)host_y[1],
         (double)host_y[2], (double)host_y[3]);
  return 0;
}
