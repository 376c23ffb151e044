// v2 fused_step: one kernel per step, the recurrent GEMM with the step's pointwise math in its
// epilogue (rnn_cuda_cells.cuh), so a step is one launch and the [N, G*H] projections never go
// through global memory.
//
// Forward step: block (x, y) owns hidden units j0 = 16x .. j0+15 and samples n0 = 16y .. n0+15,
// and computes hp[n, k*H + j] = sum_i h_{s-1}[n, i] w_hh[k*H + j, i] for all G gates k of its
// units: the G*16 rows of w_hh it needs are 16-row slabs at k*H + j0, read in place (no
// reordering). The 16 rows of h_{s-1} and the G*16 rows of w_hh are copied, a chunk of the
// reduction axis at a time (the whole of it for H <= 608 with LSTM), into shared memory with
// cp.async, every load in flight at once. Each warp takes every 8th group of 4 along the
// reduction axis; lane (u, half) accumulates 8 samples x G gates of unit u, reading float4s of
// h (broadcast to the 16 lanes of a half) and of w_hh. The 8 warps' partial sums are added in
// warp order through shared memory, then thread (r, u) runs forward_cell for (n0+r, j0+u).
//
// Backward step s: the same tiling computes dh_rec[n, j] = sum_k dhp_{s+1}[n, k] w_hh[k, j]
// (k over G*H; columns j0 .. j0+15 of w_hh are 16 consecutive floats of each row), then
// backward_cell(s) adds it to the carried dh. The last step's dh0 GEMM stays a plain sgemm.
//
// Deterministic: every sum has an order fixed by the shape (each lane's groups of 4 in order,
// then the warps in order).
#include <algorithm>
#include <string>

#include <cuda_runtime.h>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/rnn/rnn_cuda_cells.cuh"
#include "kernels/rnn/rnn_cuda_internal.h"

namespace crema::kernels::cuda::rnn_detail {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr int kTile = 16;  // samples and hidden units per block
static_assert(kThreads == kTile * kTile, "the epilogue's thread (r, u) per (sample, unit)");
constexpr int kSamplesPerLane = kTile / 2;     // a warp's two halves take 8 samples each
constexpr int kSharedFloats = 200 * 1024 / 4;  // the budget of one block's shared memory

__device__ inline void copy_async_4(float* dst, const float* src, bool valid) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ inline void copy_async_16(float* dst, const float* src, bool valid) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ inline void wait_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
}

// Copies columns [k0, k0 + kn) of `rows` rows into shared rows of stride ld, zero-padded to
// kn4 = kn rounded up to 4. Row r's source is row_ptr(r) (null: a row past the matrix, zeros).
// vec: every row pointer + k0 is 16-byte aligned and kn is a multiple of 4.
template <class RowPtr>
__device__ void load_rows(float* sm, int ld, int rows, int k0, int kn, bool vec, RowPtr row_ptr,
                          const float* any_valid) {
  const int kn4 = (kn + 3) / 4 * 4;
  if (vec) {
    const int q4 = kn4 / 4;
    for (int i = threadIdx.x; i < rows * q4; i += kThreads) {
      const int r = i / q4, q = i % q4;
      const float* row = row_ptr(r);
      copy_async_16(sm + r * ld + 4 * q, row ? row + k0 + 4 * q : any_valid, row != nullptr);
    }
  } else {
    for (int i = threadIdx.x; i < rows * kn4; i += kThreads) {
      const int r = i / kn4, k = i % kn4;
      const float* row = row_ptr(r);
      const bool valid = row != nullptr && k < kn;
      copy_async_4(sm + r * ld + k, valid ? row + k0 + k : any_valid, valid);
    }
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The reduction-axis chunk for `floats_per_k` shared floats per unit of k (and `fixed` more),
// a multiple of 32 so that a row stride of chunk + 4 spreads float4 reads over the banks.
int chunk_for(int K, int floats_per_k, int fixed) {
  const int cap = (kSharedFloats - fixed) / floats_per_k / 32 * 32;
  return std::min((K + 31) / 32 * 32, cap);
}

template <int G>
__global__ void __launch_bounds__(kThreads)
    fused_forward_kernel(GatesForward a, const float* __restrict__ w_hh, int chunk, bool vec) {
  extern __shared__ float4 shared4[];
  float* sm = reinterpret_cast<float*>(shared4);
  const int H = a.H, N = a.N, ld = chunk + 4;
  const int j0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int u = lane % kTile, half = lane / kTile;
  float acc[kSamplesPerLane][G] = {};
  // Shared rows 0..15: h_{s-1} of samples n0..; rows 16 + 16k + v: w_hh row k*H + j0 + v.
  auto row_ptr = [&](int r) -> const float* {
    if (r < kTile) return n0 + r < N ? a.h_prev + int64_t(n0 + r) * H : nullptr;
    const int k = (r - kTile) / kTile, j = j0 + (r - kTile) % kTile;
    return j < H ? w_hh + (int64_t(k) * H + j) * H : nullptr;
  };
  for (int k0 = 0; k0 < H; k0 += chunk) {
    const int kn = min(chunk, H - k0);
    __syncthreads();  // the previous chunk is consumed
    load_rows(sm, ld, kTile * (G + 1), k0, kn, vec, row_ptr, w_hh);
    wait_copies();
    __syncthreads();
    for (int q = warp; q < (kn + 3) / 4; q += kWarps) {
      float4 w4[G];
      for (int k = 0; k < G; ++k) {
        w4[k] = *reinterpret_cast<const float4*>(sm + (kTile + k * kTile + u) * ld + 4 * q);
      }
      for (int i = 0; i < kSamplesPerLane; ++i) {
        const float4 h4 =
            *reinterpret_cast<const float4*>(sm + (half * kSamplesPerLane + i) * ld + 4 * q);
        for (int k = 0; k < G; ++k) {
          float s = acc[i][k];
          s = fmaf(h4.x, w4[k].x, s);
          s = fmaf(h4.y, w4[k].y, s);
          s = fmaf(h4.z, w4[k].z, s);
          acc[i][k] = fmaf(h4.w, w4[k].w, s);
        }
      }
    }
  }
  __syncthreads();
  // partial[warp][sample][gate][unit]
  float* partial = sm;
  for (int i = 0; i < kSamplesPerLane; ++i) {
    for (int k = 0; k < G; ++k) {
      partial[((warp * kTile + half * kSamplesPerLane + i) * G + k) * kTile + u] = acc[i][k];
    }
  }
  __syncthreads();
  const int r = threadIdx.x / kTile, v = threadIdx.x % kTile;
  if (n0 + r >= N || j0 + v >= H) return;
  forward_cell(a, n0 + r, j0 + v, [&](int k) {
    float s = 0.0f;
    for (int w = 0; w < kWarps; ++w) s += partial[((w * kTile + r) * G + k) * kTile + v];
    return s;
  });
}

__global__ void __launch_bounds__(kThreads)
    fused_backward_kernel(GatesBackward a, const float* __restrict__ dhp_next,
                          const float* __restrict__ w_hh, int K, int chunk, bool vec) {
  extern __shared__ float4 shared4[];
  float* sm = reinterpret_cast<float*>(shared4);
  const int H = a.H, N = a.N, ld = chunk + 4;
  const int j0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int u = lane % kTile, half = lane / kTile;
  float* a_rows = sm;               // [16][ld]: dhp_{s+1} of samples n0..
  float* b_rows = sm + kTile * ld;  // [chunk][16]: w_hh[k, j0 .. j0+15]
  float acc[kSamplesPerLane] = {};
  for (int k0 = 0; k0 < K; k0 += chunk) {
    const int kn = min(chunk, K - k0), kn4 = (kn + 3) / 4 * 4;
    __syncthreads();
    load_rows(
        a_rows, ld, kTile, k0, kn, vec,
        [&](int r) -> const float* {
          return n0 + r < N ? dhp_next + int64_t(n0 + r) * K : nullptr;
        },
        w_hh);
    // w_hh rows k0 .. k0 + kn (zero rows up to a multiple of 4), 16 columns each.
    if (vec) {
      for (int i = threadIdx.x; i < kn4 * 4; i += kThreads) {
        const int k = i / 4, c = 4 * (i % 4);
        const bool valid = k < kn && j0 + c < H;
        copy_async_16(b_rows + k * kTile + c, valid ? w_hh + int64_t(k0 + k) * H + j0 + c : w_hh,
                      valid);
      }
    } else {
      for (int i = threadIdx.x; i < kn4 * kTile; i += kThreads) {
        const int k = i / kTile, c = i % kTile;
        const bool valid = k < kn && j0 + c < H;
        copy_async_4(b_rows + k * kTile + c, valid ? w_hh + int64_t(k0 + k) * H + j0 + c : w_hh,
                     valid);
      }
    }
    wait_copies();
    __syncthreads();
    for (int q = warp; q < kn4 / 4; q += kWarps) {
      const float* b = b_rows + 4 * q * kTile + u;
      const float b0 = b[0], b1 = b[kTile], b2 = b[2 * kTile], b3 = b[3 * kTile];
      for (int i = 0; i < kSamplesPerLane; ++i) {
        const float4 a4 =
            *reinterpret_cast<const float4*>(a_rows + (half * kSamplesPerLane + i) * ld + 4 * q);
        float s = acc[i];
        s = fmaf(a4.x, b0, s);
        s = fmaf(a4.y, b1, s);
        s = fmaf(a4.z, b2, s);
        acc[i] = fmaf(a4.w, b3, s);
      }
    }
  }
  __syncthreads();
  float* partial = sm;  // [warp][sample][unit]
  for (int i = 0; i < kSamplesPerLane; ++i) {
    partial[(warp * kTile + half * kSamplesPerLane + i) * kTile + u] = acc[i];
  }
  __syncthreads();
  const int r = threadIdx.x / kTile, v = threadIdx.x % kTile;
  if (n0 + r >= N || j0 + v >= H) return;
  float dh_rec = 0.0f;
  for (int w = 0; w < kWarps; ++w) dh_rec += partial[(w * kTile + r) * kTile + v];
  backward_cell(a, n0 + r, j0 + v, dh_rec);
}

template <class Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) {
    throw DeviceError(std::string("rnn fused step: cannot use ") + std::to_string(bytes) +
                      " bytes of shared memory per block: " + cudaGetErrorString(e));
  }
}

template <int G>
void launch_forward(const GatesForward& a, const float* w_hh, gpu::Stream stream) {
  const int rows = kTile * (G + 1);
  const int chunk = chunk_for(a.H, rows, 4 * rows);
  const size_t floats = std::max(rows * (chunk + 4), kWarps * kTile * G * kTile);
  const bool vec = a.H % 4 == 0 && aligned16(a.h_prev) && aligned16(w_hh);
  allow_shared(fused_forward_kernel<G>, floats * sizeof(float));
  const dim3 grid(unsigned(ceil_div(a.H, kTile)), unsigned(ceil_div(a.N, kTile)));
  fused_forward_kernel<G><<<grid, kThreads, floats * sizeof(float), stream>>>(a, w_hh, chunk, vec);
  gpu::check_launch("rnn fused_forward_step");
}

}  // namespace

void fused_forward_step(const GatesForward& a, const float* w_hh, gpu::Stream stream) {
  switch (gate_count(a.cell)) {
    case 4:
      return launch_forward<4>(a, w_hh, stream);
    case 3:
      return launch_forward<3>(a, w_hh, stream);
    default:
      return launch_forward<1>(a, w_hh, stream);
  }
}

void fused_backward_step(const GatesBackward& a, const float* dhp_next, const float* w_hh,
                         gpu::Stream stream) {
  const int K = dhp_next ? gate_count(a.cell) * a.H : 0;
  const int chunk = std::max(32, chunk_for(K, 2 * kTile, 4 * kTile));
  const size_t floats = std::max(kTile * (chunk + 4) + chunk * kTile, kWarps * kTile * kTile);
  const bool vec =
      a.H % 4 == 0 && K % 4 == 0 && (!dhp_next || aligned16(dhp_next)) && aligned16(w_hh);
  allow_shared(fused_backward_kernel, floats * sizeof(float));
  const dim3 grid(unsigned(ceil_div(a.H, kTile)), unsigned(ceil_div(a.N, kTile)));
  fused_backward_kernel<<<grid, kThreads, floats * sizeof(float), stream>>>(a, dhp_next, w_hh, K,
                                                                            chunk, vec);
  gpu::check_launch("rnn fused_backward_step");
}

}  // namespace crema::kernels::cuda::rnn_detail
