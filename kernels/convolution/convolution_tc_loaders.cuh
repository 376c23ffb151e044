// The 16-bit tensor-core convolutions' loaders (convolution_tc.h): each fills one kBK-deep slab
// of a GEMM operand in shared memory (convolution_tc_gemm.cuh's swizzled tiles). Elements outside
// the image, past the inner range or past the last row are zeros, so they add nothing.
//
// Two ways in, per loader (VEC):
//   8  16-byte cp.async copies of 8 channels (the channel count a multiple of 8, 16-byte aligned
//      tensors): asynchronous, the pipeline hides their latency;
//   1  element-wise loads into registers, stored as whole chunks (any channel count: the
//      3-channel stem): the slab is filled before `load` returns (it writes a stage nobody reads
//      until the next __syncthreads), so only the other operand's copies overlap the math.
// Elements are moved as raw 16-bit words: the loaders serve bf16 and fp16 alike.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/convolution/convolution_cuda_internal.h"
#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_tc_gemm.cuh"

namespace crema::kernels::cuda::tc {

using implicit_gemm::FastDivmod;

// The geometry in 32-bit ints (the entry points checked the sizes) and its divisors.
struct Params {
  int N, C, H, W, K, R, S, P, Q, G, Cg, Kg, RS;
  int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  FastDivmod by_PQ, by_Q, by_HW, by_W, by_Cg, by_Kg, by_S, by_stride_h, by_stride_w;
};

// The sizes, groups and (inline) divisors of g; throws crema::Error where 32-bit indexing or the
// grid's z extent cannot hold them.
inline Params params_of(const Conv2dGeometry& g) {
  implicit_gemm::check_sizes(g);
  if (g.groups > 65535) {
    throw Error("conv2d on 16-bit tensors (CUDA): " + std::to_string(g.groups) +
                " groups; at most 65535 are supported");
  }
  Params p;
  p.N = int(g.N), p.C = int(g.C), p.H = int(g.H), p.W = int(g.W), p.K = int(g.K);
  p.R = int(g.R), p.S = int(g.S), p.P = int(g.P()), p.Q = int(g.Q()), p.G = int(g.groups);
  p.Cg = p.C / p.G, p.Kg = p.K / p.G, p.RS = p.R * p.S;
  p.pad_h = int(g.pad_h), p.pad_w = int(g.pad_w);
  p.stride_h = int(g.stride_h), p.stride_w = int(g.stride_w);
  p.dilation_h = int(g.dilation_h), p.dilation_w = int(g.dilation_w);
  p.by_PQ = FastDivmod(p.P * p.Q), p.by_Q = FastDivmod(p.Q), p.by_HW = FastDivmod(p.H * p.W);
  p.by_W = FastDivmod(p.W), p.by_Cg = FastDivmod(p.Cg), p.by_Kg = FastDivmod(p.Kg);
  p.by_S = FastDivmod(p.S);
  p.by_stride_h = FastDivmod(p.stride_h), p.by_stride_w = FastDivmod(p.stride_w);
  return p;
}

// Eight 16-bit words as one 16-byte store into shared memory.
__device__ __forceinline__ void store_chunk(uint16_t* dst, const uint16_t (&v)[8]) {
  uint4 u;
  u.x = v[0] | uint32_t(v[1]) << 16, u.y = v[2] | uint32_t(v[3]) << 16;
  u.z = v[4] | uint32_t(v[5]) << 16, u.w = v[6] | uint32_t(v[7]) << 16;
  *reinterpret_cast<uint4*>(dst) = u;
}

// Rows are output pixels (forward: m = (n, p, q)) or input pixels (data: m = (n, h, w)); the inner
// index is (r, s, ch) with ch fastest over the group's CIN channels of the tensor read: forward
// x [N,H,W,C] (CIN = Cg), data dy [N,P,Q,K] (CIN = Kg; the gather form: pixel (h, w) takes tap
// (r, s) from output (p, q) = ((h + pad_h - r*dil_h) / stride_h, ...) where both divisions are
// exact and land inside P x Q). k-inner tile [ROWS][kBK].
//   VEC 8: thread t copies chunk t % 4 of rows t / 4 + 64 i (one (r, s, ch) split per slab);
//   VEC 1: thread t loads the 16 inner indices 16 (t % 2) .. of row t / 2, stepping (r, s, ch).
template <int ROWS, int VEC, bool DATA>
struct PixelLoader {
  static constexpr int TPR = VEC == 8 ? kBK / 8 : kThreads / ROWS;  // threads per row
  static constexpr int STEP = kThreads / TPR, PER = ROWS / STEP, KPER = kBK / TPR;
  static_assert(PER * STEP == ROWS && KPER % 8 == 0, "rows and chunks split evenly");

  Params p;
  const uint16_t* src;  // x or dy at the group's first channel
  int k_end, seg, row;
  int base[PER];       // the row's image offset, -1 past the last row
  int a[PER], b[PER];  // forward: p*stride - pad (top-left tap); data: h + pad

  __device__ PixelLoader(const Params& params, const uint16_t* tensor, int m0, int group,
                         int k_end_)
      : p(params), k_end(k_end_), seg(threadIdx.x % TPR), row(threadIdx.x / TPR) {
    src = tensor + (DATA ? group * p.Kg : group * p.Cg);
    const int M = DATA ? p.N * p.H * p.W : p.N * p.P * p.Q;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int m = m0 + row + i * STEP;
      int n, rest, u, v;
      (DATA ? p.by_HW : p.by_PQ).divmod(m, n, rest);
      (DATA ? p.by_W : p.by_Q).divmod(rest, u, v);
      base[i] = m < M ? n * (DATA ? p.P * p.Q * p.K : p.H * p.W * p.C) : -1;
      a[i] = DATA ? u + p.pad_h : u * p.stride_h - p.pad_h;
      b[i] = DATA ? v + p.pad_w : v * p.stride_w - p.pad_w;
    }
  }

  // Where tap (r, s), channel ch of row i lives in src; false outside the tensor.
  __device__ __forceinline__ bool locate(int i, int r, int s, int ch, int& offset) const {
    const int dh = r * p.dilation_h, dw = s * p.dilation_w;
    bool ok = base[i] >= 0;
    if constexpr (DATA) {
      const int hp = a[i] - dh, wq = b[i] - dw;
      int out_p, rest_h, out_q, rest_w;
      p.by_stride_h.divmod(hp, out_p, rest_h);
      p.by_stride_w.divmod(wq, out_q, rest_w);
      ok = ok && hp >= 0 && wq >= 0 && rest_h == 0 && rest_w == 0 && out_p < p.P && out_q < p.Q;
      offset = base[i] + (out_p * p.Q + out_q) * p.K + ch;
    } else {
      const int h = a[i] + dh, w = b[i] + dw;
      ok = ok && unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W);
      offset = base[i] + (h * p.W + w) * p.C + ch;
    }
    return ok;
  }

  __device__ void load(uint16_t* tile, int k0) const {
    const int kk = k0 + seg * KPER;
    int tap, ch, r, s;
    (DATA ? p.by_Kg : p.by_Cg).divmod(kk, tap, ch);
    p.by_S.divmod(tap, r, s);
    if constexpr (VEC == 8) {
#pragma unroll
      for (int i = 0; i < PER; ++i) {
        int offset = 0;
        const bool ok = kk < k_end && locate(i, r, s, ch, offset);
        detail::cp_async<16>(tile + inner_offset(row + i * STEP, seg), ok ? src + offset : src,
                             ok ? 16 : 0);
      }
    } else {
      const int CIN = DATA ? p.Kg : p.Cg;
      uint16_t v[KPER];
#pragma unroll
      for (int j = 0; j < KPER; ++j) {
        int offset = 0;
        v[j] = kk + j < k_end && locate(0, r, s, ch, offset) ? src[offset] : 0;
        if (++ch == CIN) ch = 0, s = s + 1 == p.S ? (++r, 0) : s + 1;
      }
#pragma unroll
      for (int c = 0; c < KPER / 8; ++c) {
        store_chunk(tile + inner_offset(row, seg * (KPER / 8) + c),
                    *reinterpret_cast<const uint16_t(*)[8]>(&v[8 * c]));
      }
    }
  }
};

// Rows n0 .. of a dense row-major matrix [rows][length] (the KRSC filter, or its transpose
// [Cg, R, S, Kg] for backward data), the inner index contiguous; k-inner tile [ROWS][kBK].
template <int ROWS, int VEC>
struct DenseLoader {
  static constexpr int TPR = VEC == 8 ? kBK / 8 : kThreads / ROWS;
  static constexpr int STEP = kThreads / TPR, PER = ROWS / STEP, KPER = kBK / TPR;
  static_assert(PER * STEP == ROWS && KPER % 8 == 0, "rows and chunks split evenly");

  const uint16_t* first;  // row n0 + row
  int rows_left, length, k_end, seg, row;

  __device__ DenseLoader(const uint16_t* matrix, int rows, int length_, int n0, int k_end_)
      : rows_left(rows - n0 - int(threadIdx.x) / TPR),
        length(length_),
        k_end(k_end_),
        seg(threadIdx.x % TPR),
        row(threadIdx.x / TPR) {
    first = matrix + int64_t(n0 + row) * length;
  }

  __device__ void load(uint16_t* tile, int k0) const {
    const int kk = k0 + seg * KPER;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const uint16_t* src = first + int64_t(i * STEP) * length;
      const bool row_ok = i * STEP < rows_left;
      if constexpr (VEC == 8) {
        const bool ok = row_ok && kk < k_end;
        detail::cp_async<16>(tile + inner_offset(row + i * STEP, seg), ok ? src + kk : first,
                             ok ? 16 : 0);
      } else {
        uint16_t v[KPER];
#pragma unroll
        for (int j = 0; j < KPER; ++j) v[j] = row_ok && kk + j < k_end ? src[kk + j] : 0;
#pragma unroll
        for (int c = 0; c < KPER / 8; ++c) {
          store_chunk(tile + inner_offset(row + i * STEP, seg * (KPER / 8) + c),
                      *reinterpret_cast<const uint16_t(*)[8]>(&v[8 * c]));
        }
      }
    }
  }
};

// Filter gradient, A: rows are the group's filter taps m = (r, s, c) (M = R*S*Cg), the inner index
// the output position npq = n*P*Q + p*Q + q: element x[n, p*stride_h - pad_h + r*dil_h, ..,
// g*Cg + c]. k-outer tile [kBK][ROWS].
//   VEC 8: thread t keeps the run of rows 8 (t % (ROWS/8)) (its tap split once) and copies the 8
//          channels at inner offsets t / (ROWS/8) + j STEP: a warp reads whole pixels' channels;
//   VEC 1: thread t keeps row t % ROWS and loads inner offsets t / ROWS + j STEP.
template <int ROWS, int VEC>
struct TapLoader {
  static constexpr int RUNS = ROWS / VEC, STEP = kThreads / RUNS, PER = kBK / STEP;
  static_assert(PER * STEP == kBK, "slab splits evenly");

  Params p;
  const uint16_t* x;
  int k_end, run, col;
  bool valid;
  int off_h, off_w, ch;  // r*dil_h - pad_h, s*dil_w - pad_w, g*Cg + c

  __device__ TapLoader(const Params& params, const uint16_t* x_, int m0, int group, int k_end_)
      : p(params), x(x_), k_end(k_end_), run(threadIdx.x % RUNS), col(threadIdx.x / RUNS) {
    const int m = m0 + VEC * run;
    valid = m < p.RS * p.Cg;
    int tap, c, r, s;
    p.by_Cg.divmod(m, tap, c);
    p.by_S.divmod(tap, r, s);
    off_h = r * p.dilation_h - p.pad_h, off_w = s * p.dilation_w - p.pad_w;
    ch = group * p.Cg + c;
  }

  __device__ void load(uint16_t* tile, int k0) const {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int kk = col + j * STEP, npq = k0 + kk;
      int n, pq, out_p, out_q;
      p.by_PQ.divmod(npq, n, pq);
      p.by_Q.divmod(pq, out_p, out_q);
      const int h = out_p * p.stride_h + off_h, w = out_q * p.stride_w + off_w;
      const bool ok =
          valid && npq < k_end && unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W);
      const uint16_t* src = x + ((n * p.H + h) * p.W + w) * p.C + ch;
      if constexpr (VEC == 8) {
        detail::cp_async<16>(tile + outer_offset<ROWS>(kk, run), ok ? src : x, ok ? 16 : 0);
      } else {
        tile[outer_offset<ROWS>(kk, run / 8) + run % 8] = ok ? *src : 0;
      }
    }
  }
};

// Filter gradient, B: rows are the group's output channels, the inner index the output position:
// dy[npq, g*Kg + n]. k-outer tile [kBK][ROWS]; threads laid out as TapLoader's.
template <int ROWS, int VEC>
struct OutputChannelLoader {
  static constexpr int RUNS = ROWS / VEC, STEP = kThreads / RUNS, PER = kBK / STEP;
  static_assert(PER * STEP == kBK, "slab splits evenly");

  const uint16_t* dy;  // dy[0, g*Kg + n0 + VEC run] (dy[0] past the group's last channel)
  int K, k_end, run, col;
  bool valid;

  __device__ OutputChannelLoader(const Params& p, const uint16_t* dy_, int n0, int group,
                                 int k_end_)
      : K(p.K), k_end(k_end_), run(threadIdx.x % RUNS), col(threadIdx.x / RUNS) {
    valid = n0 + VEC * run < p.Kg;
    dy = valid ? dy_ + group * p.Kg + n0 + VEC * run : dy_;
  }

  __device__ void load(uint16_t* tile, int k0) const {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int kk = col + j * STEP, npq = k0 + kk;
      const bool ok = valid && npq < k_end;
      const uint16_t* src = dy + int64_t(npq) * K;
      if constexpr (VEC == 8) {
        detail::cp_async<16>(tile + outer_offset<ROWS>(kk, run), ok ? src : dy, ok ? 16 : 0);
      } else {
        tile[outer_offset<ROWS>(kk, run / 8) + run % 8] = ok ? *src : 0;
      }
    }
  }
};

}  // namespace crema::kernels::cuda::tc
