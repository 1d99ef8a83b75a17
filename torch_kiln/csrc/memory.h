/* SPDX-License-Identifier: Apache-2.0 */
// memory.h - the kiln allocator's device-level queries (allocator.cpp), for api.cpp.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstdint>

namespace torch_kiln {

// The kiln c10::DeviceAllocator (REGISTER_ALLOCATOR'd for PrivateUse1).
c10::DeviceAllocator* device_allocator();

// Waits for the device's work, then returns its cached blocks to the system.
void empty_cache(c10::DeviceIndex index);

// Bytes a device can still hand out and its capacity: the memory limit where the device has
// one, else the host's memory (kiln device memory is host memory).
struct MemoryInfo {
  uint64_t free;
  uint64_t total;
};
MemoryInfo memory_info(c10::DeviceIndex index);

}  // namespace torch_kiln
