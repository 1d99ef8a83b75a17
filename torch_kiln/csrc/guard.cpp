/* SPDX-License-Identifier: Apache-2.0 */
// guard.cpp - DeviceGuardImplInterface for kiln: current device, the default stream per device,
// and events mapped onto kiln_event_t.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "kiln_torch.h"

namespace torch_kiln {
namespace {

constexpr c10::DeviceType kKiln = c10::DeviceType::PrivateUse1;

struct KilnGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kKiln; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kKiln);
    c10::Device old = getDevice();
    if (old.index() != d.index()) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kKiln, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kKiln);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) {
      try {
        set_current_device(d.index());
      } catch (...) {
      }
    }
  }

  // Eager kiln ops are ordered on the device's default stream; torch sees one stream id 0.
  // torch.Stream(device="kiln") and the stream pool hand out that stream too: work a program
  // puts on "another" stream stays ordered with the rest, which is stricter than it asked for
  // and never wrong.
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    kiln_device_t* dev = device(device_index >= 0 ? device_index : stream.device_index());
    if (*event == nullptr) {
      kiln_event_t* e = nullptr;
      check(kiln_event_create(dev, &e), "event_create");
      *event = e;
    }
    check(kiln_event_record(dev, static_cast<kiln_event_t*>(*event), nullptr), "event_record");
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    check(kiln_stream_wait_event(device(stream.device_index()), nullptr,
                                 static_cast<kiln_event_t*>(event)),
          "stream_wait_event");
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    int done = 0;
    check(kiln_event_query(device(current_device()), static_cast<kiln_event_t*>(event), &done),
          "event_query");
    return done != 0;
  }
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {
    if (!event) return;
    kiln_registry_t* reg = nullptr;
    kiln_device_t* dev = nullptr;
    if (kiln_registry_default(&reg) == KILN_OK &&
        kiln_registry_get(reg, device_index >= 0 ? device_index : 0, &dev) == KILN_OK)
      kiln_event_destroy(dev, static_cast<kiln_event_t*>(event));
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    check(kiln_event_synchronize(device(current_device()), static_cast<kiln_event_t*>(event)),
          "event_synchronize");
  }
  bool queryStream(const c10::Stream& stream) const override {
    int idle = 0;
    check(kiln_stream_query(device(stream.device_index()), nullptr, &idle), "stream_query");
    return idle != 0;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    check(kiln_stream_synchronize(device(stream.device_index()), nullptr), "stream_synchronize");
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    synchronize(device_index);
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, KilnGuardImpl);

}  // namespace torch_kiln
