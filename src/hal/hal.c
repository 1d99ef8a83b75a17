/* SPDX-License-Identifier: Apache-2.0 */
/* hal.c - validation of vendor vtables. */
#include "kiln/hal.h"

#include <stddef.h>

#define REQUIRED(field)                                                                   \
  do {                                                                                    \
    if (!KILN_HAL_HAS(vt, field))                                                         \
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "device vtable lacks required slot '" \
                        #field "'");                                                      \
  } while (0)

kiln_status_t kiln_hal_validate(const kiln_device_vtable_t* vt) {
  if (!vt) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "device has no vtable");
  if (vt->struct_size < offsetof(kiln_device_vtable_t, synchronize) + sizeof(vt->synchronize))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "device vtable struct_size %zu is smaller than the required slots (%zu)",
                      vt->struct_size,
                      offsetof(kiln_device_vtable_t, synchronize) + sizeof(vt->synchronize));
  REQUIRED(destroy);
  REQUIRED(query_props);
  REQUIRED(alloc);
  REQUIRED(free);
  REQUIRED(copy);
  REQUIRED(fill);
  REQUIRED(stream_create);
  REQUIRED(stream_destroy);
  REQUIRED(stream_synchronize);
  REQUIRED(stream_query);
  REQUIRED(event_create);
  REQUIRED(event_destroy);
  REQUIRED(event_record);
  REQUIRED(stream_wait_event);
  REQUIRED(event_synchronize);
  REQUIRED(event_query);
  REQUIRED(synchronize);
  /* compute: all four slots or none */
  const int n_compute = KILN_HAL_HAS(vt, supports) + KILN_HAL_HAS(vt, prepare) +
                        KILN_HAL_HAS(vt, execute) + KILN_HAL_HAS(vt, executable_destroy);
  if (n_compute != 0 && n_compute != 4)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "device vtable sets %d of the 4 compute slots (supports, prepare, execute, "
                      "executable_destroy): all or none", n_compute);
  return KILN_OK;
}
