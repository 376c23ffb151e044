// The filter gradient of the convolutions on NHWC tensors on Hopper: wgmma fed by TMA, on
// convolution_tc_wgmma.cuh's kernel and ring with convolution_tc_wgmma_filter.cuh's Problem, and
// for f32 tensors in tf32 math at 128 columns on convolution_tc_wgmma_filter_tf32.cuh's kernel
// (below, "f32 in tf32"); this file the cut, the plan and the launches. Compiled for sm_90a
// alone (CMakeLists.txt); convolution_tc_filter_cuda.cu (16-bit) and convolution_nhwc_cuda.cu
// (f32) call it on a device of compute capability 9.0 for the geometries it fits
// (wgmma_backward_filter_fits), the mma.sync kernels otherwise.
//
//   dw[K, r, s, C] += dy[N*P*Q, K]^T * x_rs[N*P*Q, C]   (fp32), one GEMM per tap (r, s), where
//   x_rs[n, p, q] = x[n, stride_h p + r*dil_h - pad_h, stride_w q + s*dil_w - pad_w] (zero
//   outside the image)
//
// The inner index N*P*Q is the outer index of both tensors: the operands are MN-major, a box of
// 64 channels x 64 pixels lands as 64 rows (pixels) of 128 bytes (channels), and the wgmma's
// transpose immediates read it as such (convolution_tc_wgmma.cuh). The GEMM's rows are the
// tensor with more channels (R = dy and rows k, or R = x and rows c), its columns the other (S), so
// that a 64-channel side does not leave half of the 128-row tile empty:
//
//   D[i, j] = sum over the slice's pixels of R[pixel, i] * S[pixel, j]   (tile 128 x BN, BN = 128,
//             or 64 when S has at most 64 channels)
//
// Slabs of 64 consecutive output positions of N*P*Q, read flat from both tensors: dy [N*P*Q, K] as
// a matrix (a 2-D map), x at the tap's pixel of each position -- through an im2col map (the TMA
// walks the 64 positions from the slab's first, wrapping at the end of a row and of an image, and
// reads x at position + the tap's offset, zeros over the padding and past the last image), or,
// for a 1x1 at stride 1 without padding, as a matrix too. Positions past N*P*Q are zeros in dy:
// they add nothing. Each block has one tap, except:
//
// Two taps a tile where x has 64 channels (and the filter taps): one tap's product is only 64
// rows (64 x J), so the tile's rows are x at two taps instead, box 0 = x at tap t, box 1 = x at
// tap t+1 (R = x, rows c twice), B = dy's BN channels loaded once for both; warpgroup 0 computes
// tap t's 64 x BN block, warpgroup 1 tap t+1's, each summed into its own tap of dw. With an odd
// tap count the last tile's box 1 is not asked for (nor its bytes expected): warpgroup 1
// multiplies stale shared memory and its half of the tile is never added.
//
// The slabs are cut into slices, one block per (tile, tap or tap pair, slice), and the slices of
// a unit into clusters of up to 8 consecutive blocks (filter_plan's cost model picks both). A
// block parks its fp32 D in its shared memory in dw's orientation (output channel outer, channel
// inner); the cluster syncs, and each block adds its share of the tile over the cluster's blocks
// in rank order, reading their shared memory (DSMEM), into dw (+=) -- or, where a unit has more
// than one cluster (groups), into the group's partial [group][K][R][S][C] that sum_groups_kernel
// then adds to dw in group order. Deterministic, no float atomics. Channels past C or K are
// zero-filled by the TMA. What fits: groups 1, strides up to 8, C and K multiples of 8 (f32: 4),
// the im2col corners (-pad, pad - (taps - 1) * dilation) within [-128, 127].
//
// f32 in tf32: tf32 wgmma reads K-major operands only (no transpose immediates), and here both
// operands have the reduction index N*P*Q outermost. The TMA lands the same MN-major boxes, each
// 32 f32 channels x 32 positions (4096 bytes: a slab is 32 positions, so that a K-major row of
// them is 128 bytes), which are rewritten as K-major tiles -- row m = channel m, its 32 positions
// 128B-swizzled, the box at the same offset -- rounding every value to TF32 on the way (cvt.rna,
// as the mma.sync kernels do: the tensor cores would truncate) before the consumers run wgmma
// m64nBNk8 on them. Two forms, by measurement (H200, 2026-11-28, session 22, call 7, ms in the
// same call): at 128 columns tf32_filter_kernel, whose third warpgroup, the transposers, writes
// each stage of a raw ring into a second ring, one block an SM (3x3 128@28 0.130 against the
// other form's 0.136, 1x1 2048 -> 512 at 7 0.056 against 0.084); at 64 columns the ring kernel
// of the 16-bit passes, its consumers transposing each stage in place (FilterProblem::transpose),
// two blocks an SM (the paired 64@56 0.172 against 0.196). The slices, clusters, groups and
// epilogue as above.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/convolution/convolution_tc_wgmma_filter.cuh"
#include "kernels/convolution/convolution_tc_wgmma_filter_tf32.cuh"
#include "kernels/convolution/convolution_tc_wgmma_launch.cuh"

namespace crema::kernels::cuda::tc {
namespace {

using filter::FilterProblem, filter::Tf32Ring, filter::kTf32Threads, filter::tf32_filter_kernel;
using wg::kBM;

// Two blocks an SM on an H100 or H200 (132 SMs; f32: one, kTf32Blocks); clusters of at most 8
// (the portable size).
constexpr int kTargetBlocks = 264, kTf32Blocks = 132;
// A slice holds at least 512 positions (8 16-bit slabs), or 256 where a 16-bit reduction is at
// most 2,048 positions (32 slabs: 7 x 7 images at batch 16 to 32). H200, 2026-11-29 (session 27,
// call 4), `crema bench conv-tc --math bf16`, ms at 512 / 256, batch 16, 1x1s at 7 x 7 (13 slabs):
// 832 -> 256 0.0116 / 0.0094, 672 -> 192 0.0112 / 0.0092, 320 -> 1280 0.0120 / 0.0099; 5x5 48 ->
// 128 0.0098 / 0.0077; but 512 -> 128 at 28 x 28 (196 slabs) 0.0165 / 0.0184; at 14 x 14 (49
// slabs) alike.
constexpr int kMinPositionsPerSlice = 512, kMinPositionsPerShortSlice = 256;
constexpr int64_t kShortPositions = 2048;
constexpr int kMaxCluster = 8;

// The cut's cost model, in microseconds (H200 estimates, not tuned per shape): a slab of a
// 128 x 128 tile (2 x 128 x 128 x 64 flops) takes a block sharing its SM with another about 0.75
// us (0.37 at 64 columns); a block has about kEpilogueSlabs slabs' worth of pipeline fill, store
// and cluster sum on top; a round of at most kTargetBlocks / 2 blocks runs one an SM, each
// kLoneRound of a shared round's time (the f32 transposers' kernel runs one an SM anyway: there
// a lone round costs a whole one); each group reads and writes dw's size once (dw += its sum,
// or its partial written and read back) at about 3 TB/s, and more than one group costs the sum's
// launch, about kSumLaunchUs.
constexpr double kEpilogueSlabs = 3.0, kLoneRound = 0.75, kPartialBytesPerUs = 3.0e6;
constexpr double kSumLaunchUs = 4.0;

struct Cut {
  int cluster, groups;  // slices = cluster x groups
};

// The cheapest cut of `slabs` slabs for `units` blocks a slice, `slab_us` a slab, dw
// `filter_bytes`, at most `most` slices. Fewer slices leave SMs idle or a second round nearly
// empty (256@14 3x3: 36 units x 8 slices = 288 blocks, 24 of them a round of their own); more
// groups move dw's bytes again.
Cut cheapest_cut(int64_t units, int64_t slabs, double slab_us, double filter_bytes, int64_t most,
                 const std::array<int, kMaxCluster + 1>& slots, double lone_round) {
  Cut best{1, 1};
  double best_us = -1.0;
  for (int cluster = 1; cluster <= kMaxCluster; ++cluster) {
    if (slots[size_t(cluster)] < cluster) continue;  // no cluster of that size fits
    const int64_t resident = slots[size_t(cluster)];
    for (int64_t groups = 1; groups * cluster <= most || (groups == 1 && cluster == 1); ++groups) {
      const int64_t slices = groups * cluster, length = (slabs + slices - 1) / slices;
      const int64_t blocks = units * slices, full = blocks / resident;
      const int64_t rest = blocks % resident;
      const double rounds = double(full) + (rest == 0              ? 0.0
                                            : rest <= resident / 2 ? lone_round
                                                                   : 1.0);
      const double us = rounds * (double(length) + kEpilogueSlabs) * slab_us +
                        double(groups) * 2.0 * filter_bytes / kPartialBytesPerUs +
                        (groups > 1 ? kSumLaunchUs : 0.0);
      if (best_us < 0.0 || us < best_us) best = {cluster, int(groups)}, best_us = us;
    }
  }
  return best;
}

// The blocks resident at once in clusters of 1 .. kMaxCluster (index: the cluster's size), asked
// of the driver once a device and kind of kernel (16-bit, f32): a GPC holds whole clusters only,
// so clusters of 7 or 8 leave some of its 2 x 16-18 block slots empty (without this, 256@14's 252
// blocks in clusters of 7 took 0.096 ms against 0.066 unclustered: H200, 2026-11-28, session 20,
// call 2; asked, call 3 took 0.0675). Where the driver does not answer, every size is taken to
// fill the target (kTargetBlocks, kTf32Blocks) -- and that answer is kept too: the workspace's
// size and the launch must see the same cut.
std::array<int, kMaxCluster + 1> estimated_slots(int target) {
  std::array<int, kMaxCluster + 1> slots{};
  for (int c = 1; c <= kMaxCluster; ++c) slots[size_t(c)] = target / c * c;
  return slots;
}

template <class Kernel>
std::array<int, kMaxCluster + 1> ask_slots(Kernel kernel, int bytes, int threads, int target) {
  std::array<int, kMaxCluster + 1> slots = estimated_slots(target);
  const bool sized = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          bytes) == cudaSuccess;
  if (!sized) cudaGetLastError();  // clear it: the estimates stand
  for (int c = 1; sized && c <= kMaxCluster; ++c) {
    const int clusters = wg::active_clusters(kernel, bytes, threads, c);
    if (clusters >= 0) slots[size_t(c)] = std::min(target, clusters * c);  // else the estimate
  }
  return slots;
}

std::array<int, kMaxCluster + 1> cluster_slots(bool transposers) {
  static std::mutex mutex;
  static std::map<std::pair<int, bool>, std::array<int, kMaxCluster + 1>> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    return estimated_slots(transposers ? kTf32Blocks : kTargetBlocks);
  }
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find({device, transposers}); it != known.end()) return it->second;
  // Every filter kernel of a kind has the same threads and shared memory: one stands in (the
  // ring kernel's 96 KB, 16-bit and f32 at 64 columns; tf32_filter_kernel's two rings).
  const auto slots = transposers
                         ? ask_slots(tf32_filter_kernel<128, FilterProblem<float, 128, true>>,
                                     Tf32Ring<128>::SMEM_BYTES, kTf32Threads, kTf32Blocks)
                         : ask_slots(wg::wgmma_kernel<Bf16, 128, FilterProblem<Bf16, 128, true>, 0>,
                                     wg::Ring<128>::SMEM_BYTES, wg::kBlockThreads, kTargetBlocks);
  known[{device, transposers}] = slots;
  return slots;
}

// The cut: which tensor gives the rows, the tile, the slices (`length` slabs each) in clusters.
struct FilterPlan {
  bool rows_are_dy;  // R = dy (rows k, columns c) or R = x (rows c, columns k)
  bool plain;        // a 1x1 at stride 1 without padding: x read as a matrix, not im2col
  bool paired;       // two taps a tile (C = 64 with taps): R = x, I = 64, (taps + 1) / 2 tap blocks
  int I, J, bn, tiles_j, tiles, taps, tap_blocks, cluster, groups, slices, length, slabs;
};

// f32: slabs of 32 positions; at 64 columns the ring kernel's blocks (half the 16-bit slab's
// products at half the rate: the same slab times), at 128 tf32_filter_kernel's, one an SM, a
// slab's time alone on it (2 x 128 x 128 x 32 flops plus the transposes' shared-memory traffic)
// taken as about 0.4 us: estimates, not tuned per shape.
FilterPlan filter_plan(const Conv2dGeometry& g, bool f32) {
  FilterPlan f{};
  const int64_t NPQ = g.N * g.P() * g.Q();
  f.plain =
      g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0 && g.stride_h == 1 && g.stride_w == 1;
  f.taps = int(g.R * g.S);
  f.paired = wgmma_backward_filter_pairs_taps(g);
  f.rows_are_dy = !f.paired && g.K >= g.C;
  f.I = int(f.rows_are_dy ? g.K : g.C), f.J = int(f.rows_are_dy ? g.C : g.K);
  f.bn = f.J > 64 ? 128 : 64;
  f.tiles_j = (f.J + f.bn - 1) / f.bn;
  f.tiles = (f.paired ? 1 : (f.I + kBM - 1) / kBM) * f.tiles_j;
  f.tap_blocks = f.paired ? (f.taps + 1) / 2 : f.taps;
  const int positions = f32 ? 32 : 64;
  const int64_t slabs = (NPQ + positions - 1) / positions;
  f.slabs = int(slabs);
  const bool short_16bit = !f32 && NPQ <= kShortPositions;  // tf32's not measured
  const int64_t per_slice =
      (short_16bit ? kMinPositionsPerShortSlice : kMinPositionsPerSlice) / positions;
  const int64_t most = std::clamp<int64_t>((slabs + per_slice - 1) / per_slice, 1, 65535);
  // Paired taps take clusters of one block (groups only): in clusters of 4 the 64@56 3x3 took
  // 0.0972 ms at batch 128 and 0.0569 at 64 against 0.0851 and 0.0503 unclustered (H200,
  // 2026-11-28, session 20, call 3; its 64 x 64 filter's partials are small: little to save).
  const bool transposers = f32 && f.bn == 128;
  std::array<int, kMaxCluster + 1> slots = cluster_slots(transposers);
  if (f.paired) std::fill(slots.begin() + 2, slots.end(), 0);
  const double slab_us = transposers ? 0.4 : f.bn == 128 ? 0.75 : 0.37;
  const Cut cut =
      cheapest_cut(int64_t(f.tiles) * f.tap_blocks, slabs, slab_us, double(f.taps) * f.I * f.J * 4,
                   most, slots, transposers ? 1.0 : kLoneRound);
  f.cluster = cut.cluster, f.groups = cut.groups, f.slices = cut.cluster * cut.groups;
  f.length = int((slabs + f.slices - 1) / f.slices);
  return f;
}

// dw[i] += the sum over groups, in order, of partial[group][i] (i < count, dw's size): one
// element a thread, eight groups' loads in flight (added in order still). The paired 64@56's dw
// is 36,864 floats in 52 groups: four a thread left 36 blocks for 132 SMs (its whole pass at
// batch 64 0.0590 ms, this 0.0553, 494ebbc's slice sums 0.0509 in both calls; H200, 2026-11-28,
// session 20, calls 4 and 5).
__global__ void __launch_bounds__(256)
    sum_groups_kernel(const float* __restrict__ partial, int groups, int64_t count,
                      float* __restrict__ dw) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += stride) {
    float sum = partial[i];
#pragma unroll 8
    for (int g = 1; g < groups; ++g) sum += partial[g * count + i];
    dw[i] += sum;
  }
}

template <class E>
void filter_typed(const Conv2dGeometry& g, wg::MapType type, const void* x, const void* dy,
                  float* dw, void* workspace, gpu::Stream stream, const char* what) {
  constexpr bool kF32 = std::is_same_v<E, float>;
  const FilterPlan f = filter_plan(g, kF32);
  const int positions = FilterProblem<E, 64, true>::kPositions;
  const int64_t NPQ = g.N * g.P() * g.Q();
  const int pad_h = int(g.pad_h), pad_w = int(g.pad_w);
  const CUtensorMap map_dy = wg::matrix_map(type, dy, NPQ, g.K, positions);
  const CUtensorMap map_x = f.plain ? wg::matrix_map(type, x, NPQ, g.C, positions)
                                    : wg::im2col_map(type, x, g.N, g.H, g.W, g.C, -pad_h, -pad_w,
                                                     pad_h - int((g.R - 1) * g.dilation_h),
                                                     pad_w - int((g.S - 1) * g.dilation_w),
                                                     int(g.stride_h), int(g.stride_w), positions);
  const CUtensorMap& map_r = f.rows_are_dy ? map_dy : map_x;
  const CUtensorMap& map_s = f.rows_are_dy ? map_x : map_dy;
  auto* partial = static_cast<float*>(workspace);
  if (f.groups > 1 && partial == nullptr) {
    throw Error(std::string(what) + ": " + std::to_string(f.groups) +
                " groups of slices are summed in the workspace (its _workspace query): none given");
  }
  // Each group's partial starts K * taps * C floats (a multiple of 16) on: aligned where the
  // workspace is.
  const void* out = f.groups > 1 ? static_cast<const void*>(partial) : dw;
  const bool vector = reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int blocks_x = f.tiles * f.tap_blocks;
  auto go = [&](auto bn, auto im2col) {
    constexpr int BN = decltype(bn)::value;
    constexpr bool IM2COL = decltype(im2col)::value;
    FilterProblem<E, BN, IM2COL> problem{};
    problem.I = f.I, problem.J = f.J, problem.tiles = f.tiles, problem.tiles_j = f.tiles_j;
    problem.length = f.length, problem.slabs_all = f.slabs;
    problem.dw = dw, problem.partial = partial, problem.vector = vector;
    problem.PQ = int(g.P() * g.Q()), problem.Q = int(g.Q());
    problem.lower_h = -pad_h, problem.lower_w = -pad_w;
    problem.stride_h = int(g.stride_h), problem.stride_w = int(g.stride_w);
    problem.taps = f.taps, problem.S = int(g.S);
    problem.dil_h = int(g.dilation_h), problem.dil_w = int(g.dilation_w);
    problem.rows_are_dy = f.rows_are_dy, problem.paired = f.paired;
    problem.blocks_x = blocks_x, problem.cluster = f.cluster, problem.groups = f.groups;
    const int64_t blocks = int64_t(blocks_x) * f.slices;
    if constexpr (kF32 && BN == 128) {
      const auto kernel = tf32_filter_kernel<BN, FilterProblem<float, BN, IM2COL>>;
      constexpr int kBytes = Tf32Ring<BN>::SMEM_BYTES;
      detail::set_shared_memory_limit(kernel, kBytes, what);
      const wg::ClusterLaunch launch(blocks, kBytes, stream, f.cluster, kTf32Threads);
      const cudaError_t e = cudaLaunchKernelEx(&launch.config, kernel, map_r, map_s, problem);
      if (e != cudaSuccess) {
        throw DeviceError(std::string("CUDA kernel ") + what + " failed to launch in clusters of " +
                          std::to_string(f.cluster) + ": " + cudaGetErrorString(e));
      }
      gpu::check_launch(what);
    } else {
      wg::launch<E, BN>(map_r, map_s, problem, blocks, stream, what, f.cluster);
    }
  };
  using Im2col = std::true_type;
  using Plain = std::false_type;
  if (f.bn == 128) {
    f.plain ? go(std::integral_constant<int, 128>{}, Plain{})
            : go(std::integral_constant<int, 128>{}, Im2col{});
  } else {
    f.plain ? go(std::integral_constant<int, 64>{}, Plain{})
            : go(std::integral_constant<int, 64>{}, Im2col{});
  }
  if (f.groups > 1) {
    const int64_t count = g.K * f.taps * g.C;
    const unsigned blocks = unsigned(std::clamp<int64_t>((count + 255) / 256, 1, 4096));
    sum_groups_kernel<<<blocks, 256, 0, stream>>>(partial, f.groups, count, dw);
    gpu::check_launch(what);
  }
}

}  // namespace

bool wgmma_backward_filter_pairs_taps(const Conv2dGeometry& g) {
  return g.C == 64 && g.R * g.S >= 2;
}

// The im2col map's limits: steps (the strides) 1..8, corners -pad and pad - (taps - 1) *
// dilation within [-128, 127], offsets (taps - 1) * dilation 16-bit; N*P*Q an int.
bool wgmma_backward_filter_fits(const Conv2dGeometry& g, int channel_multiple) {
  auto corner = [](int64_t v) { return v >= -128 && v <= 127; };
  const int64_t reach_h = (g.R - 1) * g.dilation_h, reach_w = (g.S - 1) * g.dilation_w;
  return g.groups == 1 && g.stride_h <= 8 && g.stride_w <= 8 && g.C % channel_multiple == 0 &&
         g.K % channel_multiple == 0 && corner(-g.pad_h) && corner(-g.pad_w) &&
         corner(g.pad_h - reach_h) && corner(g.pad_w - reach_w) && reach_h < 65536 &&
         reach_w < 65536 && g.N * g.P() * g.Q() + 64 < INT32_MAX;
}

size_t wgmma_backward_filter_workspace(const Conv2dGeometry& g, bool f32) {
  const FilterPlan f = filter_plan(g, f32);
  return f.groups > 1 ? size_t(f.groups) * size_t(g.K * f.taps * g.C) * sizeof(float) : 0;
}

int wgmma_backward_filter_cluster(const Conv2dGeometry& g, bool f32) {
  return filter_plan(g, f32).cluster;
}

void wgmma_backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                           float* dw, void* workspace, gpu::Stream stream) {
  const char* what = "conv2d_tc_backward_filter (wgmma)";
  if (type == TcType::bf16) {
    filter_typed<Bf16>(g, wg::map_type(type), x, dy, dw, workspace, stream, what);
  } else {
    filter_typed<F16>(g, wg::map_type(type), x, dy, dw, workspace, stream, what);
  }
}

void wgmma_backward_filter_f32(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                               void* workspace, gpu::Stream stream) {
  filter_typed<float>(g, wg::kF32Map, x, dy, dw, workspace, stream,
                      "conv2d_backward_filter_nhwc (tf32 wgmma)");
}

}  // namespace crema::kernels::cuda::tc
