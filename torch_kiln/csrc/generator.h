/* SPDX-License-Identifier: Apache-2.0 */
// generator.h - the kiln torch generator: counter-based Philox state {seed, offset} per device.
// Every kiln random kernel is a pure function of (seed, offset, element index) and advances the
// offset by one per call, so results are reproducible for a seed whatever the thread count.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstring>

#include "kiln_torch.h"

extern "C" {
#include "kiln/kernels/random.h"
}

namespace torch_kiln {

struct KilnGeneratorImpl final : c10::GeneratorImpl {
  explicit KilnGeneratorImpl(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

  void set_current_seed(uint64_t seed) override {
    state_.seed = seed;
    state_.offset = 0;
  }
  void set_offset(uint64_t offset) override { state_.offset = offset; }
  uint64_t get_offset() const override { return state_.offset; }
  uint64_t current_seed() const override { return state_.seed; }
  uint64_t seed() override {
    uint64_t s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }
  // State: 16 bytes (seed, offset) in a CPU uint8 tensor.
  void set_state(const c10::TensorImpl& new_state) override {
    TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == 16,
                "kiln generator state must be a uint8 tensor of 16 bytes, got ", new_state.numel(), " elements");
    std::memcpy(&state_, new_state.data(), 16);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(t.data_ptr(), &state_, 16);
    return t.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  kiln_philox_t* philox() { return &state_; }

 private:
  KilnGeneratorImpl* clone_impl() const override {
    auto* g = new KilnGeneratorImpl(device_.index());
    g->state_ = state_;
    return g;
  }
  kiln_philox_t state_ = {67280421310721ull, 0};
};

// The generator to draw from: `gen` if given (must be a kiln generator), else the default one
// of `device`.
inline at::Generator pick_generator(const std::optional<at::Generator>& gen, c10::Device device) {
  if (gen.has_value() && gen->defined()) {
    TORCH_CHECK(gen->device().type() == c10::DeviceType::PrivateUse1,
                "Expected a 'kiln' device type for generator but found '", gen->device().type(), "'");
    return *gen;
  }
  return default_generator(device.index());
}

}  // namespace torch_kiln
