// The NHWC passes' loaders (convolution_nhwc_cuda.cu): each issues the cp.async copies of one
// BK-deep slab of a GEMM operand into a "k inner" shared tile [rows][kLds]
// (convolution_nhwc_gemm.cuh). Elements outside the image, past the inner range or past the last
// row are zero-filled (cp.async with 0 source bytes), so they add nothing.
#pragma once

#include <cstdint>

#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_nhwc_gemm.cuh"

namespace crema::kernels::cuda::nhwc {

using implicit_gemm::FastDivmod;

// The geometry in 32-bit ints (the entry points checked the sizes) and its divisors.
struct Params {
  int N, C, H, W, K, R, S, P, Q, G, Cg, Kg, RS;
  int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  FastDivmod by_PQ, by_Q, by_HW, by_W, by_Cg, by_Kg, by_S, by_stride_h, by_stride_w;
};

// Rows are output pixels (forward: m = (n, p, q)) or input pixels (data: m = (n, h, w)); the inner
// index is (r, s, ch) with ch fastest over the group's CIN channels of the tensor read: forward
// x [N,H,W,C] (CIN = Cg), data dy [N,P,Q,K] (CIN = Kg; the gather form: pixel (h, w) takes tap
// (r, s) from output (p, q) = ((h + pad_h - r*dil_h) / stride_h, ...) where both divisions are
// exact and land inside P x Q). Thread t copies VEC channels (16 or 4 bytes) at inner offset
// (t % CHUNKS) * VEC of rows t / CHUNKS + i * STEP: one (r, s, ch) split per slab, the rows'
// pixel coordinates found once.
template <int ROWS, int VEC, bool DATA>
struct PixelLoader {
  static constexpr int CHUNKS = kBK / VEC, STEP = kThreads / CHUNKS, PER = ROWS / STEP;
  static_assert(PER * STEP == ROWS, "rows split evenly");

  Params p;
  const float* src;  // x or dy at the group's first channel
  int k_end, chunk, row;
  int base[PER];       // the row's image offset, -1 past the last row
  int a[PER], b[PER];  // forward: p*stride - pad (top-left tap); data: h + pad

  __device__ PixelLoader(const Params& params, const float* tensor, int m0, int group, int k_end_)
      : p(params), k_end(k_end_), chunk(threadIdx.x % CHUNKS), row(threadIdx.x / CHUNKS) {
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

  __device__ void load(float* tile, int k0) const {
    const int kk = k0 + chunk * VEC;
    int tap, ch, r, s;
    (DATA ? p.by_Kg : p.by_Cg).divmod(kk, tap, ch);
    p.by_S.divmod(tap, r, s);
    const int dh = r * p.dilation_h, dw = s * p.dilation_w;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      bool ok = kk < k_end && base[i] >= 0;
      int offset = 0;
      if constexpr (DATA) {
        const int hp = a[i] - dh, wq = b[i] - dw;
        ok = ok && hp >= 0 && wq >= 0;
        int out_p, rest_h, out_q, rest_w;
        p.by_stride_h.divmod(hp, out_p, rest_h);
        p.by_stride_w.divmod(wq, out_q, rest_w);
        ok = ok && rest_h == 0 && rest_w == 0 && out_p < p.P && out_q < p.Q;
        offset = base[i] + (out_p * p.Q + out_q) * p.K + ch;
      } else {
        const int h = a[i] + dh, w = b[i] + dw;
        ok = ok && unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W);
        offset = base[i] + (h * p.W + w) * p.C + ch;
      }
      detail::cp_async<VEC * 4>(tile + (row + i * STEP) * kLds + chunk * VEC,
                                ok ? src + offset : src, ok ? VEC * 4 : 0);
    }
  }
};

// Rows n0 .. of a dense row-major matrix [rows][length] (the KRSC filter, or its transpose
// [Cg, R, S, Kg] for backward data), the inner index contiguous; the same thread layout.
template <int ROWS, int VEC>
struct DenseLoader {
  // A thin tile (ROWS < STEP) leaves the threads past its last row idle.
  static constexpr int CHUNKS = kBK / VEC, STEP = kThreads / CHUNKS;
  static constexpr int PER = ROWS >= STEP ? ROWS / STEP : 1;
  static_assert(ROWS >= STEP ? PER * STEP == ROWS : STEP % ROWS == 0, "rows split evenly");

  const float* matrix;
  const float* first;  // row n0 + row
  int rows_left, length, k_end, chunk, row;

  __device__ DenseLoader(const float* matrix_, int rows, int length_, int n0, int k_end_)
      : matrix(matrix_),
        rows_left(rows - n0 - int(threadIdx.x) / CHUNKS),
        length(length_),
        k_end(k_end_),
        chunk(threadIdx.x % CHUNKS),
        row(threadIdx.x / CHUNKS) {
    first = matrix + int64_t(n0 + row) * length;
  }

  __device__ void load(float* tile, int k0) const {
    if (ROWS < STEP && row >= ROWS) return;
    const int kk = k0 + chunk * VEC;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const bool ok = kk < k_end && i * STEP < rows_left;
      detail::cp_async<VEC * 4>(tile + (row + i * STEP) * kLds + chunk * VEC,
                                ok ? first + int64_t(i * STEP) * length + kk : matrix,
                                ok ? VEC * 4 : 0);
    }
  }
};

// Patch row m = (r, s, c) of a group's filter gradient: where its tap reads x relative to an
// output position (h = p*stride_h + off_h, w likewise) and which channel (g*Cg + c).
__device__ __forceinline__ void decode_tap(const Params& p, int m, int group, int& off_h,
                                           int& off_w, int& ch) {
  int tap, c, r, s;
  p.by_Cg.divmod(m, tap, c);
  p.by_S.divmod(tap, r, s);
  off_h = r * p.dilation_h - p.pad_h, off_w = s * p.dilation_w - p.pad_w;
  ch = group * p.Cg + c;
}

// Filter gradient, A: rows are the filter taps (r, s, c) of the group (M = R*S*Cg), the inner
// index is the output position n*P*Q + p*Q + q, so each element is a 4-byte copy of
// x[n, p*stride_h - pad_h + r*dil_h, ..., g*Cg + c]. Thread t keeps row t % ROWS (its tap split
// once) and copies inner offsets t / ROWS + j * STEP: a warp reads 32 consecutive channels.
template <int ROWS>
struct TapLoader {
  static constexpr int STEP = kThreads / ROWS, PER = kBK / STEP;

  Params p;
  const float* x;
  int k_end, row, col;
  bool valid;
  int off_h, off_w, ch;  // r*dil_h - pad_h, s*dil_w - pad_w, g*Cg + c

  __device__ TapLoader(const Params& params, const float* x_, int m0, int group, int k_end_)
      : p(params), x(x_), k_end(k_end_), row(threadIdx.x % ROWS), col(threadIdx.x / ROWS) {
    const int m = m0 + row;
    valid = m < p.RS * p.Cg;
    decode_tap(p, m, group, off_h, off_w, ch);
  }

  __device__ void load(float* tile, int k0) const {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int npq = k0 + col + j * STEP;
      int n, pq, out_p, out_q;
      p.by_PQ.divmod(npq, n, pq);
      p.by_Q.divmod(pq, out_p, out_q);
      const int h = out_p * p.stride_h + off_h, w = out_q * p.stride_w + off_w;
      const bool ok =
          valid && npq < k_end && unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W);
      detail::cp_async<4>(tile + row * kLds + col + j * STEP,
                          ok ? x + ((n * p.H + h) * p.W + w) * p.C + ch : x, ok ? 4 : 0);
    }
  }
};

// Filter gradient, B: rows are the group's output channels k, the inner index the output
// position: dy[npq, g*Kg + k], 4-byte copies, a warp reading consecutive channels.
template <int ROWS>
struct OutputChannelLoader {
  static constexpr int STEP = kThreads / ROWS, PER = kBK / STEP;

  const float* dy;  // dy[0, g*Kg + n0 + row] (dy[0] past the group's last channel)
  int K, k_end, row, col;
  bool valid;

  __device__ OutputChannelLoader(const Params& p, const float* dy_, int n0, int group, int k_end_)
      : K(p.K), k_end(k_end_), row(threadIdx.x % ROWS), col(threadIdx.x / ROWS) {
    valid = n0 + row < p.Kg;
    dy = valid ? dy_ + group * p.Kg + n0 + row : dy_;
  }

  __device__ void load(float* tile, int k0) const {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int npq = k0 + col + j * STEP;
      const bool ok = valid && npq < k_end;
      detail::cp_async<4>(tile + row * kLds + col + j * STEP, ok ? dy + int64_t(npq) * K : dy,
                          ok ? 4 : 0);
    }
  }
};

// Filter gradient with 16-byte copies (Cg and Kg multiples of 4, tensors 16-byte aligned), into
// k-outer tiles [kBK][ROWS + 4]. A: 4 consecutive taps (r, s, c..c+3) of one output position:
// x[n, h, w, g*Cg + c .. + 3]. Thread t keeps the run of rows 4 (t % (ROWS/4)) (its tap split once)
// and copies inner offsets t / (ROWS/4) + j * STEP; a warp reads 512 consecutive bytes of a pixel.
template <int ROWS>
struct TapRunLoader {
  static constexpr int RUNS = ROWS / 4, STEP = kThreads / RUNS, PER = kBK / STEP;
  static_assert(PER * STEP == kBK, "slab splits evenly");

  Params p;
  const float* x;
  int k_end, run, col;
  bool valid;
  int off_h, off_w, ch;  // r*dil_h - pad_h, s*dil_w - pad_w, g*Cg + c

  __device__ TapRunLoader(const Params& params, const float* x_, int m0, int group, int k_end_)
      : p(params), x(x_), k_end(k_end_), run(threadIdx.x % RUNS), col(threadIdx.x / RUNS) {
    const int m = m0 + 4 * run;
    valid = m < p.RS * p.Cg;
    decode_tap(p, m, group, off_h, off_w, ch);
  }

  __device__ void load(float* tile, int k0) const {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int kk = col + j * STEP, npq = k0 + kk;
      int n, pq, out_p, out_q;
      p.by_PQ.divmod(npq, n, pq);
      p.by_Q.divmod(pq, out_p, out_q);
      const int h = out_p * p.stride_h + off_h, w = out_q * p.stride_w + off_w;
      const bool ok =
          valid && npq < k_end && unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W);
      detail::cp_async<16>(tile + kk * (ROWS + 4) + 4 * run,
                           ok ? x + ((n * p.H + h) * p.W + w) * p.C + ch : x, ok ? 16 : 0);
    }
  }
};

// B: 4 consecutive output channels of one output position, dy[npq, g*Kg + k .. + 3].
template <int ROWS>
struct OutputRunLoader {
  static constexpr int RUNS = ROWS / 4, STEP = kThreads / RUNS, PER = kBK / STEP;
  static_assert(PER * STEP == kBK, "slab splits evenly");

  const float* dy;  // dy[0, g*Kg + n0 + 4 run] (dy[0] past the group's last channel)
  int K, k_end, run, col;
  bool valid;

  __device__ OutputRunLoader(const Params& p, const float* dy_, int n0, int group, int k_end_)
      : K(p.K), k_end(k_end_), run(threadIdx.x % RUNS), col(threadIdx.x / RUNS) {
    valid = n0 + 4 * run < p.Kg;
    dy = valid ? dy_ + group * p.Kg + n0 + 4 * run : dy_;
  }

  __device__ void load(float* tile, int k0) const {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int kk = col + j * STEP, npq = k0 + kk;
      const bool ok = valid && npq < k_end;
      detail::cp_async<16>(tile + kk * (ROWS + 4) + 4 * run, ok ? dy + int64_t(npq) * K : dy,
                           ok ? 16 : 0);
    }
  }
};

}  // namespace crema::kernels::cuda::nhwc
