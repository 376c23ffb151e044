// Launch arithmetic shared by crema's CUDA kernels: the block size most of them use and the grid
// that covers `count` items. Host code only (no CUDA header), so .cu files and their launchers
// include it alike.
#pragma once

#include <cstdint>

namespace crema::kernels::cuda {

// The block size of the grid-stride and one-item-per-thread kernels: 8 warps, enough to hide
// latency at any occupancy an H100/H200 reaches with crema's register counts.
constexpr int kThreads = 256;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of `threads` that cover `count` items, at least 1 and at most `max_blocks` (a
// grid-stride loop then visits the rest; 65536 keeps a grid-x within any device's limit).
constexpr int blocks_for(int64_t count, int threads = kThreads, int64_t max_blocks = 65536) {
  const int64_t blocks = ceil_div(count, threads);
  return int(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

}  // namespace crema::kernels::cuda
