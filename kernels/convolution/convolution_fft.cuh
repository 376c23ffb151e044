// v10 (fft): the device kernels of FFT convolution (convolution_fft_cuda.cu has the passes).
//
// A map (one image's channel, one filter slice, one dy channel) sits zero-padded in an F x F
// buffer, F a power of two from 8 to 64. Its 2-D DFT
//   Z[u][v] = sum_{i,j < F} z[i][j] * exp(-2 pi i (u*i + v*j) / F)
// of real data is Hermitian (Z[-u][-v] = conj(Z[u][v])), so columns v = 0 .. F/2 (B = F/2 + 1 of
// them) hold all of it: F*B bins, the "half spectrum". A spectrum tensor is laid out
// [bin = u*B + v][map] (complex, float2) so that each bin's maps form the matrix the batched
// complex GEMM multiplies.
//
// forward_maps: one block transforms `per_block` maps (as many as fill 4096 complex values of
// shared memory: 1 at F = 64, 4 at 32, 16 at 16, 64 at 8). Loading writes each value at its
// bit-reversed row and column, then radix-2 decimation-in-time butterflies run over the rows
// (all F of them) and over the B kept columns, which leaves the bins in natural order.
// inverse_maps: the adjoint walk: decimation-in-frequency butterflies over the B columns (natural
// input, rows come out bit-reversed), each row's missing columns F/2+1 .. F-1 filled from
// Hermitian symmetry (z[i][F-v] = conj(z[i][v])), DIF over the rows, and the real part read back at
// bit-reversed positions, scaled by 1/F^2. Rows that hold only padding are transformed anyway
// (a simpler kernel; the butterflies are not what costs, the spectrum's traffic is).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_cuda_internal.h"

namespace crema::kernels::cuda::fft {

constexpr int kLogBufferElems = 12;  // 4096 complex values (32 KB) of maps a block
// A block's maps sit F*F + 1 complex values apart: the neighbouring maps that consecutive threads
// touch when they load or store one bin of several maps then fall on different banks.
constexpr int kBufferElems = (1 << kLogBufferElems) + (1 << (kLogBufferElems - 2 * kMinLogF));

// Where element `pos` (row-major in F x F) of the block's map `map` sits in shared memory.
__device__ inline int at(int map, int pos, int log_f) {
  return map * ((1 << (2 * log_f)) + 1) + pos;
}

__device__ inline float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// The index of `i` (log_f bits) with its bits reversed.
__device__ inline int bit_reverse(int i, int log_f) {
  return int(__brev(unsigned(i)) >> (32 - log_f));
}

// tw[t] = exp(-2 pi i t / F), t < F/2.
__device__ inline void make_twiddles(float2* tw, int log_f) {
  const int F = 1 << log_f;
  for (int t = threadIdx.x; t < F / 2; t += blockDim.x) {
    float s, c;
    sincospif(-2.0f * float(t) / float(F), &s, &c);
    tw[t] = make_float2(c, s);
  }
}

// Radix-2 butterflies of `count` length-F transforms in s: transform t's element e sits at
// s[at(t / per_map, (t % per_map) * t_stride) + e * e_stride]. kDit: decimation in time
// (bit-reversed input, natural output); else decimation in frequency (natural in, bit-reversed
// out). kInverse conjugates the twiddles (no 1/F: the caller scales once).
template <bool kDit, bool kInverse>
__device__ void butterflies(float2* s, const float2* tw, int log_f, int count, int per_map,
                            int t_stride, int e_stride) {
  const int F = 1 << log_f, half = F / 2;
  for (int log_h = kDit ? 0 : log_f - 1; kDit ? log_h < log_f : log_h >= 0;
       log_h += kDit ? 1 : -1) {
    const int h = 1 << log_h;
    for (int idx = threadIdx.x; idx < count * half; idx += blockDim.x) {
      // Consecutive threads take neighbouring elements of shared memory: along a transform when
      // its elements are contiguous (rows), across transforms when they are F apart (columns,
      // where walking along one would put all 32 threads on one bank).
      const int t = e_stride == 1 ? idx >> (log_f - 1) : idx % count;
      const int j = e_stride == 1 ? idx & (half - 1) : idx / count, k = j & (h - 1);
      const int e0 = ((j - k) << 1) + k, e1 = e0 + h;
      const int base = at(t / per_map, (t % per_map) * t_stride, log_f);
      float2 w = tw[k << (log_f - 1 - log_h)];
      if (kInverse) w.y = -w.y;
      float2* p0 = s + base + e0 * e_stride;
      float2* p1 = s + base + e1 * e_stride;
      const float2 a = *p0, b = *p1;
      if (kDit) {
        const float2 bw = cmul(b, w);
        *p0 = make_float2(a.x + bw.x, a.y + bw.y);
        *p1 = make_float2(a.x - bw.x, a.y - bw.y);
      } else {
        *p0 = make_float2(a.x + b.x, a.y + b.y);
        *p1 = cmul(make_float2(a.x - b.x, a.y - b.y), w);
      }
    }
    __syncthreads();
  }
}

// out[bin][m] (bin < F*B, m < maps) = the half spectrum of map m of src [maps, rows, cols], the
// map placed at rows top .. top+rows-1 and columns left .. left+cols-1 of the F x F buffer (the
// rest zero). Grid: ceil(maps / per_block) blocks of kThreads.
__global__ void __launch_bounds__(kThreads)
    forward_maps(const float* __restrict__ src, int maps, int rows, int cols, int top, int left,
                 int log_f, float2* __restrict__ out) {
  __shared__ float2 s[kBufferElems];
  __shared__ float2 tw[1 << (kMaxLogF - 1)];
  const int F = 1 << log_f, B = F / 2 + 1, per_block = 1 << (kLogBufferElems - 2 * log_f);
  const int m0 = blockIdx.x * per_block;
  make_twiddles(tw, log_f);
  // Thread e fills buffer position e (no bank conflicts) from the bit-reversed source row and
  // column; a warp still reads whole rows of src, only in another order.
  for (int e = threadIdx.x; e < per_block * F * F; e += blockDim.x) {
    const int map = e >> (2 * log_f);
    const int r = bit_reverse((e >> log_f) & (F - 1), log_f) - top;
    const int c = bit_reverse(e & (F - 1), log_f) - left;
    float value = 0.0f;
    if (m0 + map < maps && r >= 0 && r < rows && c >= 0 && c < cols) {
      value = src[(int64_t(m0 + map) * rows + r) * cols + c];
    }
    s[at(map, e & (F * F - 1), log_f)] = make_float2(value, 0.0f);
  }
  __syncthreads();
  butterflies<true, false>(s, tw, log_f, per_block * F, F, F, 1);  // rows
  butterflies<true, false>(s, tw, log_f, per_block * B, B, 1, F);  // kept columns
  // Consecutive threads take consecutive maps of one bin: runs of per_block maps are contiguous.
  for (int e = threadIdx.x; e < per_block * F * B; e += blockDim.x) {
    const int map = e & (per_block - 1), bin = e >> (kLogBufferElems - 2 * log_f);
    if (m0 + map >= maps) continue;
    const int u = bin / B, v = bin % B;
    out[int64_t(bin) * maps + m0 + map] = s[at(map, (u << log_f) + v, log_f)];
  }
}

// dst[m][r][c] (=, or += when accumulate) = the real map of half spectrum in[bin][m], read at
// rows top + r and columns left + c (r < rows, c < cols), scaled by 1/F^2, plus bias[m % channels]
// when bias is not null. Grid as forward_maps.
__global__ void __launch_bounds__(kThreads)
    inverse_maps(const float2* __restrict__ in, int maps, int rows, int cols, int top, int left,
                 int log_f, const float* __restrict__ bias, int channels, bool accumulate,
                 float* __restrict__ dst) {
  __shared__ float2 s[kBufferElems];
  __shared__ float2 tw[1 << (kMaxLogF - 1)];
  const int F = 1 << log_f, B = F / 2 + 1, per_block = 1 << (kLogBufferElems - 2 * log_f);
  const int m0 = blockIdx.x * per_block;
  make_twiddles(tw, log_f);
  for (int e = threadIdx.x; e < per_block * F * B; e += blockDim.x) {
    const int map = e & (per_block - 1), bin = e >> (kLogBufferElems - 2 * log_f);
    const int u = bin / B, v = bin % B;
    s[at(map, (u << log_f) + v, log_f)] =
        m0 + map < maps ? in[int64_t(bin) * maps + m0 + map] : make_float2(0.0f, 0.0f);
  }
  __syncthreads();
  butterflies<false, true>(s, tw, log_f, per_block * B, B, 1, F);  // kept columns
  for (int e = threadIdx.x; e < per_block * F * (F / 2 - 1); e += blockDim.x) {
    const int row = e / (F / 2 - 1), v = 1 + e % (F / 2 - 1);
    const int base = at(row >> log_f, (row & (F - 1)) * F, log_f);
    const float2 z = s[base + v];
    s[base + F - v] = make_float2(z.x, -z.y);
  }
  __syncthreads();
  butterflies<false, true>(s, tw, log_f, per_block * F, F, F, 1);  // rows
  // Thread e reads buffer position e (no bank conflicts), which holds row and column
  // bit_reverse(position), and writes it when that falls in the crop.
  const float scale = 1.0f / float(F * F);
  for (int e = threadIdx.x; e < per_block * F * F; e += blockDim.x) {
    const int map = e >> (2 * log_f);
    const int r = bit_reverse((e >> log_f) & (F - 1), log_f) - top;
    const int c = bit_reverse(e & (F - 1), log_f) - left;
    if (m0 + map >= maps || r < 0 || r >= rows || c < 0 || c >= cols) continue;
    float value = s[at(map, e & (F * F - 1), log_f)].x * scale;
    if (bias != nullptr) value += bias[(m0 + map) % channels];
    float* d = dst + (int64_t(m0 + map) * rows + r) * cols + c;
    *d = accumulate ? *d + value : value;
  }
}

}  // namespace crema::kernels::cuda::fft
