// The dropout mask as a pure function of (seed, step, index), compiled for the host and the device
// from this one definition, so that the CPU and the GPU keep exactly the same units.
//
//   key  = mix(seed ^ mix(step + G))                  a stream per (seed, step)
//   bits = mix(key + (i + 1) * G)                     the (i+1)-th output of splitmix64 from key
//   keep = (bits >> 40) >= threshold,  threshold = ceil(ratio * 2^24)
// mix is splitmix64's finalizer (Steele, Lea & Flood 2014) and G = 2^64 / golden ratio, its
// increment. The top 24 bits are a uniform integer u in [0, 2^24), and u >= ratio * 2^24 exactly
// when the float u / 2^24 >= ratio: each unit is kept with probability 1 - ratio (to 2^-24).
// Integer arithmetic only, so every compiler and device gives the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace crema::kernels::dropout_hash {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

CREMA_HOST_DEVICE inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The stream of one training step.
CREMA_HOST_DEVICE inline uint64_t key(uint64_t seed, uint64_t step) {
  return mix(seed ^ mix(step + kGolden));
}

// Whether unit i is kept, given key(seed, step) and threshold(ratio).
CREMA_HOST_DEVICE inline bool keep(uint64_t key, uint64_t i, uint32_t threshold) {
  return uint32_t(mix(key + (i + 1) * kGolden) >> 40) >= threshold;
}

// ceil(ratio * 2^24) for ratio in [0, 1): the smallest 24-bit draw that is kept (host only).
inline uint32_t threshold(float ratio) {
  return uint32_t(std::ceil(double(ratio) * 16777216.0));
}

}  // namespace crema::kernels::dropout_hash
