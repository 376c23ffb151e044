// The few-input-channel filter gradient on mma.sync (convolution_stem_mma.h).
//
// One GEMM an output row (n, p): dw[K][KK] += dy_row^T[K][Q] * B_p[Q][KK], kk = r * L + j with
// L = S * C and j = s * C + c -- dw's own layout ([K][R][S][C] is [K][KK]) -- where
// B_p[q][r * L + j] = x[n, p * sh - ph + r, q * sw - pw + j / C, j % C] (zero outside the image).
// For one input row h the values T_h[j][q] = x[n, h, q * sw - pw + j / C, j % C] are staged
// transposed, q contiguous (8 q's a 16-byte ldmatrix row of the mma's B, [n][k]); B_p's row kk is
// then row j of T for input row p * sh - ph + r. ldmatrix takes a row address from each lane, so
// the GEMM's columns run across filter rows unpadded (the 7x7 stem: 147 columns, 19 n-tiles,
// against 392 columns on x padded to 8 channels); rows outside the image and columns past KK name
// a row of zeros. A is dy's row as stored, [q][k], read with ldmatrix.trans.
//
// A block walks a contiguous run of the N * P output rows in order. The input rows sit in a ring
// of R + sh slots (row h + ph of an image in slot (h + ph) % ring), and dy's rows in `depth`
// buffers (2 to 4, as the shared memory allows), copied depth - 1 rows ahead (cp.async, a commit
// group a row). While the warps multiply row (n, p), each thread's loads of the sh input rows row
// (n, p + 1) adds are in flight (its first staging tasks' values held in registers, stored after
// the math); a run entering a new image stages its R rows after a barrier instead. Warp (wn, wq)
// holds n-tiles 4 wn .. 4 wn + 3 of all K output channels (MT m-tiles of 16) in registers over the
// whole run, for the k steps wq, wq + WQ, ... of each row (WQ > 1 where few n-tiles leave warps
// idle: the 3x3 stems' 27 columns), and stores them once as its partial, [block * WQ + wq][KK][K];
// sum_kernel adds the partials to dw in that order: deterministic, no atomics.
//
// Shared memory: dy's buffers [QK][DP] (QK: Q rounded up to a 16-wide k step, rows past Q zero;
// DP = K + 8), the ring's slots [L][TP] (TP = QK + 8), the zero row. DP and TP are odd numbers of
// 16-byte units: ldmatrix's 8 rows meet 8 bank groups.
//
// What bounds it (H200, 2026-11-29, session 30, ncu on 64,3,224,224 -> 64 7x7s2): the first form
// (one dy row ahead, each staging task's indices divided out per row) ran 170 us at 15% of DRAM's
// bandwidth; copying dy 3 rows ahead at 194 registers made it 220 us:
// ncu showed one block an SM (5 warps), held by the registers (5 warps of two blocks on an SM's 4
// register files of 16K need <= 168) and by the default shared-memory split (135 KB). With at
// most 168 registers and the largest split: 123 us, two blocks an SM, SM throughput 40%. Measured
// but not kept: 2 n-tiles a warp at 96 registers (twice the warps): 64,3,224,224 7x7 0.1295 ->
// 0.1273 ms, VGG's 8,3,224,224 -> 64 0.0365 -> 0.0329, MobileNetV2's 16,3,224,224 -> 32 3x3s2
// 0.0258 -> 0.0350 (branch stem-ntw-mix picks by m-tiles; not yet run as one binary).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_stem_mma.h"
#include "kernels/convolution/convolution_tc_gemm.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::stem_mma {
namespace {

constexpr int kNtw = 4;             // n-tiles a warp (two ldmatrix.x4 a k step)
constexpr int kFastTasks = 2;       // a thread's staging tasks a row worked out once (Task)
constexpr int kHeldRows = 2;        // input rows a row adds whose loads are held over its math
constexpr int kMaxInner = 256;      // KK at most: 32 n-tiles, 8 warps of 4
constexpr int kMaxK = 64;           // output channels at most: 4 m-tiles
constexpr int kMaxBlocksPerSm = 3;  // resident blocks an SM, where the shared memory allows
constexpr int kSharedBudget = 110 << 10;
constexpr int kMaxDepth = 4;  // dy's row buffers at most
constexpr int kMaxRegisters = 168;

struct Plan {
  int N, H, W, C, K, P, Q, R, S, sh, sw, ph, pw;
  int L, KK, NT;      // S * C, R * L, n-tiles (KK in 8s)
  int QK, TP, DP;     // Q in whole k steps of 16; T's and dy's row pitches, elements
  int ring;           // input-row slots
  int depth;          // dy's row buffers (2 to kMaxDepth): rows copied depth - 1 ahead
  int WN, WQ, warps;  // warps across n-tiles, across k steps; WN * WQ
  int blocks;         // the grid (0: does not fit)
  int64_t rows;       // N * P

  __host__ __device__ uint32_t dy_bytes() const { return uint32_t(QK) * DP * 2; }
  __host__ __device__ uint32_t slot_bytes() const { return uint32_t(L) * TP * 2; }
  __host__ __device__ uint32_t shared_bytes() const {
    return uint32_t(depth) * dy_bytes() + uint32_t(ring) * slot_bytes() + uint32_t(TP) * 2;
  }
  int slices() const { return blocks * WQ; }
};

Plan plan_of(const Conv2dGeometry& g, const gpu::DeviceLimits& d) {
  Plan a{};
  a.N = int(g.N), a.H = int(g.H), a.W = int(g.W), a.C = int(g.C), a.K = int(g.K);
  a.P = int(g.P()), a.Q = int(g.Q()), a.R = int(g.R), a.S = int(g.S);
  a.sh = int(g.stride_h), a.sw = int(g.stride_w), a.ph = int(g.pad_h), a.pw = int(g.pad_w);
  a.L = a.S * a.C;
  a.KK = a.R * a.L;
  a.NT = (a.KK + 7) / 8;
  a.QK = (a.Q + 15) / 16 * 16;
  a.TP = a.QK + 8;
  a.DP = a.K + 8;
  a.ring = a.R + a.sh;
  a.WN = (a.NT + kNtw - 1) / kNtw;
  a.WQ = std::clamp(4 / a.WN, 1, a.QK / 16);
  a.warps = a.WN * a.WQ;  // at most 8: WN <= 8 (KK <= kMaxInner), WQ <= 4 / WN
  a.rows = int64_t(a.N) * a.P;
  a.depth = 2;
  // kSharedBudget, or less where a block may not have that much (compute capability 8.6: 99 KB).
  const size_t budget = std::min<size_t>(kSharedBudget, size_t(d.shared_per_block));
  if (a.KK > kMaxInner || a.shared_bytes() > budget) return a;
  while (a.depth < kMaxDepth && a.shared_bytes() + a.dy_bytes() <= budget) {
    ++a.depth;
  }
  const size_t bytes = a.shared_bytes();
  const int per_sm = std::clamp(int(size_t(d.shared_per_sm) / (bytes + 1024)), 1, kMaxBlocksPerSm);
  a.blocks = int(std::min<int64_t>(a.rows, int64_t(per_sm) * d.sms));
  return a;
}

// Staging one input row h of image n into its slot, as T[j][q] (q past Q zero), is L * QK / 8
// tasks: task i builds 8 q's of one j (16 bytes); consecutive tasks take consecutive j, so a
// warp's loads read runs of a row of x. A thread takes tasks threadIdx.x + k * blockDim.x; what
// a task needs besides the row is fixed for the kernel (Task), so the first kFastTasks of each
// thread's are worked out once.
struct Task {
  int dst;        // bytes into a slot; -1: no task
  int src;        // elements from the row's first: (q0 * sw - pw + s) * C + c, q0 = 8 qc
  uint32_t mask;  // bit e: q0 + e inside the output row and its pixel inside the image
};
__device__ __forceinline__ Task task_of(const Plan& a, int i) {
  if (i >= a.L * (a.QK / 8)) return {-1, 0, 0u};
  const int qc = i / a.L, j = i - qc * a.L, s = j / a.C, c = j - s * a.C;
  const int w0 = qc * 8 * a.sw - a.pw + s;
  uint32_t mask = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int q = qc * 8 + e, w = w0 + e * a.sw;
    if (q < a.Q && w >= 0 && w < a.W) mask |= 1u << e;
  }
  return {(j * a.TP + qc * 8) * 2, w0 * a.C + c, mask};
}
// A task's 8 values from `row` (x's input row; its pixels sw * C elements apart).
__device__ __forceinline__ void load_task(const Plan& a, const uint16_t* __restrict__ row,
                                          const Task& t, uint16_t (&v)[8]) {
  const int step = a.sw * a.C;
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = t.mask >> e & 1u ? __ldg(row + t.src + e * step) : uint16_t(0);
}
__device__ __forceinline__ void store_task(unsigned char* slot, const Task& t,
                                           const uint16_t (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) w[e] = uint32_t(v[2 * e]) | uint32_t(v[2 * e + 1]) << 16;
  *reinterpret_cast<uint4*>(slot + t.dst) = make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ const uint16_t* input_row(const Plan& a, const uint16_t* x, int n,
                                                     int h) {
  return x + (int64_t(n) * a.H + h) * a.W * a.C;
}
// Input row h's slot in the ring, and its bytes.
__device__ __forceinline__ uint32_t slot_offset(const Plan& a, int h) {
  return uint32_t((h + a.ph) % a.ring) * a.slot_bytes();
}
__device__ __forceinline__ unsigned char* slot_of(const Plan& a, unsigned char* slots, int h) {
  return slots + slot_offset(a, h);
}
// The tasks of a thread past its first kFastTasks, one row: worked out as they come.
__device__ __forceinline__ void stage_other_tasks(const Plan& a, const uint16_t* __restrict__ row,
                                                  unsigned char* slot) {
  for (int i = threadIdx.x + kFastTasks * blockDim.x; i < a.L * (a.QK / 8); i += blockDim.x) {
    const Task t = task_of(a, i);
    uint16_t v[8];
    load_task(a, row, t, v);
    store_task(slot, t, v);
  }
}
// Input rows h_first .. h_first + count - 1 (those inside the image) now: `fast` the thread's
// first kFastTasks tasks, then any others.
__device__ __forceinline__ void stage_rows(const Plan& a, const uint16_t* __restrict__ x, int n,
                                           int h_first, int count, const Task (&fast)[kFastTasks],
                                           unsigned char* slots) {
  for (int h = max(h_first, 0); h < min(h_first + count, a.H); ++h) {
    const uint16_t* row = input_row(a, x, n, h);
    unsigned char* slot = slot_of(a, slots, h);
    uint16_t v[kFastTasks][8];
#pragma unroll
    for (int k = 0; k < kFastTasks; ++k) {
      if (fast[k].dst >= 0) load_task(a, row, fast[k], v[k]);
    }
#pragma unroll
    for (int k = 0; k < kFastTasks; ++k) {
      if (fast[k].dst >= 0) store_task(slot, fast[k], v[k]);
    }
    stage_other_tasks(a, row, slot);
  }
}

// dy's output row t (its Q pixels' K channels) into a buffer: 16-byte copies.
__device__ __forceinline__ void copy_dy(const Plan& a, const uint16_t* __restrict__ dy, int64_t t,
                                        unsigned char* buffer) {
  const int per_pixel = a.K / 8;
  const uint16_t* src = dy + t * a.Q * a.K;
  for (int i = threadIdx.x; i < a.Q * per_pixel; i += blockDim.x) {
    const int q = i / per_pixel, c8 = i - q * per_pixel;
    detail::cp_async<16>(buffer + (size_t(q) * a.DP + c8 * 8) * 2, src + int64_t(i) * 8, 16);
  }
}

// cp.async.wait_group with a run-time count (0 to kMaxDepth - 2).
__device__ __forceinline__ void wait_rows(int pending) {
  switch (pending) {
    case 0:
      return detail::cp_async_wait<0>();
    case 1:
      return detail::cp_async_wait<1>();
    default:
      return detail::cp_async_wait<2>();
  }
}

// At most 168 registers: 3 warps of a block on each of an SM's 4 register files (16K each),
// so that two blocks of 5 warps (the 7x7 stem) share an SM (ncu: 194 registers gave one).
template <class E, int MT>
__global__ void __maxnreg__(kMaxRegisters)
    filter_kernel(const Plan a, const uint16_t* __restrict__ x, const uint16_t* __restrict__ dy,
                  float* __restrict__ partial) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* slots = smem + a.depth * a.dy_bytes();
  unsigned char* zeros = slots + size_t(a.ring) * a.slot_bytes();
  const uint32_t shared_at = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t slots_at = shared_at + a.depth * a.dy_bytes();
  const uint32_t zeros_at = slots_at + uint32_t(a.ring) * a.slot_bytes();

  // The zero row and dy's rows past Q in every buffer (never copied over).
  for (int i = threadIdx.x; i < a.TP / 8; i += blockDim.x) {
    reinterpret_cast<uint4*>(zeros)[i] = make_uint4(0, 0, 0, 0);
  }
  const int tail = (a.QK - a.Q) * a.DP / 8;
  for (int i = threadIdx.x; i < a.depth * tail; i += blockDim.x) {
    reinterpret_cast<uint4*>(smem + (i / tail) * a.dy_bytes() + size_t(a.Q) * a.DP * 2)[i % tail] =
        make_uint4(0, 0, 0, 0);
  }

  const int64_t first = blockIdx.x * a.rows / gridDim.x;
  const int64_t last = (blockIdx.x + 1) * a.rows / gridDim.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wn = warp % a.WN, wq = warp / a.WN;
  // A: lane l names row q = 8 (l / 16) + l % 8 at channels 8 ((l / 8) % 2) of each m-tile.
  const uint32_t a_lane = uint32_t((lane / 16 * 8 + lane % 8) * a.DP + (lane / 8) % 2 * 8) * 2;
  // B: lane l names row kk = 8 n-tile + l % 8 (n-tile 2i + l / 16 of the warp's) at q + 8 ((l /
  // 8) % 2).
  const uint32_t b_q = uint32_t((lane / 8) % 2 * 8) * 2;
  float acc[MT][kNtw][4] = {};
  Task fast[kFastTasks];
#pragma unroll
  for (int k = 0; k < kFastTasks; ++k) fast[k] = task_of(a, int(threadIdx.x + k * blockDim.x));

  // One commit group a row: rows first .. first + depth - 2 now, row t + depth - 1 at row t.
  for (int i = 0; i + 1 < a.depth; ++i) {
    if (first + i < last) copy_dy(a, dy, first + i, smem + i * a.dy_bytes());
    detail::cp_async_commit();
  }
  stage_rows(a, x, int(first / a.P), int(first % a.P) * a.sh - a.ph, a.R, fast, slots);
  wait_rows(a.depth - 2);  // row first's
  __syncthreads();
  for (int64_t t = first; t < last; ++t) {
    const int buffer = int(t - first) % a.depth, n = int(t / a.P), p = int(t % a.P);
    const bool next = t + 1 < last, same_image = next && (t + 1) / a.P == n;
    if (t + a.depth - 1 < last) {  // into the buffer of row t - 1 (read before the last barrier)
      copy_dy(a, dy, t + a.depth - 1, smem + (buffer + a.depth - 1) % a.depth * a.dy_bytes());
    }
    detail::cp_async_commit();
    // The input rows row p + 1 adds (all of them where sh > R). Where they are at most
    // kHeldRows, the loads of each thread's first kFastTasks tasks are issued now and their
    // values stored after the math (the loads' latency under it); any others after the math.
    const int added = same_image ? min(a.sh, a.R) : 0;
    const int added_first = (p + 1) * a.sh - a.ph + a.R - added;
    const bool held_rows = added <= kHeldRows;
    uint16_t held[kHeldRows][kFastTasks][8];
    if (held_rows) {
#pragma unroll
      for (int r = 0; r < kHeldRows; ++r) {
        const int h = added_first + r;
        if (r >= added || h < 0 || h >= a.H) continue;
        const uint16_t* row = input_row(a, x, n, h);
#pragma unroll
        for (int k = 0; k < kFastTasks; ++k) {
          if (fast[k].dst >= 0) load_task(a, row, fast[k], held[r][k]);
        }
      }
    }
    uint32_t b_lane[kNtw / 2];
#pragma unroll
    for (int i = 0; i < kNtw / 2; ++i) {
      const int kk = ((wn * kNtw + 2 * i + lane / 16) * 8) + lane % 8;
      uint32_t at = zeros_at + b_q;
      if (kk < a.KK) {
        const int r = kk / a.L, j = kk - r * a.L, h = p * a.sh - a.ph + r;
        if (h >= 0 && h < a.H) {
          at = slots_at + slot_offset(a, h) + uint32_t(j * a.TP) * 2 + b_q;
        }
      }
      b_lane[i] = at;
    }
    const uint32_t a_at = shared_at + uint32_t(buffer) * a.dy_bytes() + a_lane;
    for (int ks = wq; ks < a.QK / 16; ks += a.WQ) {
      uint32_t fa[MT][4], fb[kNtw][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        tc::ldmatrix_x4_trans_at(fa[mt], a_at + uint32_t(ks * 16 * a.DP + mt * 16) * 2);
      }
#pragma unroll
      for (int i = 0; i < kNtw / 2; ++i) {
        uint32_t b[4];
        tc::ldmatrix_x4_at(b, b_lane[i] + uint32_t(ks) * 32);
        fb[2 * i][0] = b[0], fb[2 * i][1] = b[1], fb[2 * i + 1][0] = b[2], fb[2 * i + 1][1] = b[3];
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int j = 0; j < kNtw; ++j) E::mma(acc[mt][j], fa[mt], fb[j]);
      }
    }
    if (held_rows) {
#pragma unroll
      for (int r = 0; r < kHeldRows; ++r) {
        const int h = added_first + r;
        if (r >= added || h < 0 || h >= a.H) continue;
        unsigned char* slot = slot_of(a, slots, h);
#pragma unroll
        for (int k = 0; k < kFastTasks; ++k) {
          if (fast[k].dst >= 0) store_task(slot, fast[k], held[r][k]);
        }
        stage_other_tasks(a, input_row(a, x, n, h), slot);
      }
    } else {
      stage_rows(a, x, n, added_first, added, fast, slots);
    }
    wait_rows(a.depth - 2);  // row t + 1's
    __syncthreads();
    if (next && !same_image) {  // a new image: its R rows, every slot free now
      stage_rows(a, x, n + 1, int((t + 1) % a.P) * a.sh - a.ph, a.R, fast, slots);
      __syncthreads();
    }
  }

  // c: rows (output channels) g and g + 8 of each m-tile, columns (kk) 2t and 2t + 1 of each
  // n-tile.
  float* out = partial + (int64_t(blockIdx.x) * a.WQ + wq) * a.KK * a.K;
  const int g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int j = 0; j < kNtw; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = mt * 16 + g + e / 2 * 8, kk = (wn * kNtw + j) * 8 + 2 * tq + e % 2;
        if (kk < a.KK) out[int64_t(kk) * a.K + k] = acc[mt][j][e];
      }
    }
  }
}

// dw[k][kk] += sum over slices, in order, of partial[slice][kk][k]. A block: 32 consecutive
// elements (e = kk * K + k) x kSumLanes lanes of slices (lane y: slices y, y + kSumLanes, ...,
// 8 loads in flight), then the lanes' sums added in order through shared memory.
constexpr int kSumLanes = 32;
__global__ void __launch_bounds__(32 * kSumLanes)
    sum_kernel(const float* __restrict__ partial, int slices, int K, int KK,
               float* __restrict__ dw) {
  __shared__ float sums[kSumLanes][33];
  const int64_t elements = int64_t(KK) * K;
  const int64_t e = blockIdx.x * 32 + int64_t(threadIdx.x);
  float sum = 0.0f;
  if (e < elements) {
#pragma unroll 8
    for (int s = int(threadIdx.y); s < slices; s += kSumLanes) sum += partial[s * elements + e];
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || e >= elements) return;
  float total = 0.0f;
#pragma unroll
  for (int y = 0; y < kSumLanes; ++y) total += sums[y][threadIdx.x];
  const int64_t kk = e / K, k = e - kk * K;
  dw[k * KK + kk] += total;
}

constexpr const char* kWhat = "conv2d_tc_backward_filter (few input channels, mma.sync)";

template <class E, int MT>
void launch(const Plan& a, const void* x, const void* dy, float* partial, gpu::Stream stream) {
  const auto kernel = filter_kernel<E, MT>;
  const int bytes = int(a.shared_bytes());
  if (bytes > 48 << 10) detail::set_shared_memory_limit(kernel, bytes, kWhat);
  // All of the SM's shared memory for blocks: the default split can leave room for one.
  cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                       int(cudaSharedmemCarveoutMaxShared));
  cudaGetLastError();
  kernel<<<unsigned(a.blocks), unsigned(a.warps * 32), size_t(bytes), stream>>>(
      a, static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(dy), partial);
  gpu::check_launch(kWhat);
}

template <class E>
void run(const Plan& a, const void* x, const void* dy, float* partial, gpu::Stream stream) {
  switch (a.K / 16) {
    case 1:
      return launch<E, 1>(a, x, dy, partial, stream);
    case 2:
      return launch<E, 2>(a, x, dy, partial, stream);
    case 3:
      return launch<E, 3>(a, x, dy, partial, stream);
    default:
      return launch<E, 4>(a, x, dy, partial, stream);
  }
}

bool geometry_fits(const Conv2dGeometry& g) {
  return g.groups == 1 && g.dilation_h == 1 && g.dilation_w == 1 && g.C < 8 && g.K % 16 == 0 &&
         g.K <= kMaxK && g.R * g.S * g.C <= kMaxInner && g.N * g.P() < (int64_t(1) << 31) &&
         g.N * g.H * g.W * g.C < (int64_t(1) << 40);
}

}  // namespace

bool backward_filter_fits(const Conv2dGeometry& g) {
  return geometry_fits(g) && plan_of(g, gpu::device_limits()).blocks > 0;
}

size_t backward_filter_workspace(const Conv2dGeometry& g) {
  if (!backward_filter_fits(g)) return 0;
  const Plan a = plan_of(g, gpu::device_limits());
  return size_t(a.slices()) * size_t(a.KK) * size_t(a.K) * sizeof(float);
}

void backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy, float* dw,
                     void* workspace, gpu::Stream stream) {
  if (!backward_filter_fits(g)) throw Error(std::string(kWhat) + ": the geometry does not fit");
  if (reinterpret_cast<uintptr_t>(dy) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(workspace) % 4 != 0) {
    throw Error(std::string(kWhat) + ": takes dy 16-byte aligned and the workspace 4-byte aligned");
  }
  const Plan a = plan_of(g, gpu::device_limits());
  auto* partial = static_cast<float*>(workspace);
  if (type == TcType::bf16) {
    run<tc::Bf16>(a, x, dy, partial, stream);
  } else {
    run<tc::F16>(a, x, dy, partial, stream);
  }
  const int64_t elements = int64_t(a.KK) * a.K;
  sum_kernel<<<unsigned((elements + 31) / 32), dim3(32, kSumLanes), 0, stream>>>(
      partial, a.slices(), a.K, a.KK, dw);
  gpu::check_launch(kWhat);
}

}  // namespace crema::kernels::cuda::stem_mma
