// Convolution v2's kernels: implicit GEMM, forward and backward data. Each pass is the
// block-tiled GEMM of kernels/tiles/block_tile.cuh whose loaders compute, for every element of a
// tile, where in x, w or dy it lives, and read it straight into shared memory: the patch matrix of
// im2col exists only one slab at a time. Per group g (Cg = C/G, Kg = K/G, CRS = Cg*R*S):
//
//   forward  y_g[Kg, N*PQ]   = w_g[Kg, CRS] * patches_g[CRS, N*PQ]           + bias (epilogue)
//   data     dx_g[Cg, N*HW]  = w_g^T[Cg, Kg*RS] * dys_g[Kg*RS, N*HW]
//   filter   dw_g[Kg, CRS+1] += dy_g[Kg, N*PQ] * [patches_g; ones]^T[N*PQ, CRS+1]
//
//   patches_g[(c,r,s), (n,p,q)] = x[n, g*Cg + c, p*stride_h - pad_h + r*dil_h, (q, s likewise)]
//   dys_g[(k,r,s), (n,h,w)]     = dy[n, g*Kg + k, (h + pad_h - r*dil_h) / stride_h, (w likewise)]
//                                 where both divisions are exact and land inside P x Q, else 0
//
// dys_g is the gather form of col2im(w^T dy): every dx element sums its own terms (no atomics).
//
// In tf32 and bf16 the same loaders feed convolution_mma.cuh's tensor-core loop (64 x 128 tiles,
// mma.sync, fp32 accumulation) instead of the FFMA loop: only the multiply of each shared slab
// and the epilogue's grouping (pairs of columns instead of float4s) change.
//
// The templates take PRECOMPUTED: false is v2, instantiated by convolution_implicit_gemm_cuda.cu
// (production, with v2's record); true is the ladder's v8, instantiated by
// ladder/precomputed_gemm_cuda.cu, whose loaders read each inner index's offsets from a table
// instead of dividing. The filter gradient, whose extra column of ones makes its last output
// column the bias gradient, is in convolution_implicit_gemm_filter_cuda.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_mma.cuh"

namespace crema::kernels::cuda::implicit_gemm {

// ---- forward: B = patches_g [CRS, N*PQ]; A = w_g [Kg, CRS] is a DenseLoader ----------------

// Thread t always loads column n0 + t % BN (one output position: its receptive field is found
// once) and rows t / BN + i * THREADS / BN of each slab; consecutive threads read consecutive q.
template <int BN, int BK, int THREADS, bool PRECOMPUTED>
struct PatchLoader {
  static constexpr int PER_THREAD = BK * BN / THREADS, ROW_STEP = THREADS / BN;
  static_assert(THREADS % BN == 0 && PER_THREAD * THREADS == BK * BN, "slab must split evenly");

  ConvParams p;
  const int4* table;             // v8: the patch rows' offsets; v2: null
  const float* image = nullptr;  // x[n, g*Cg] of this thread's column; null past N*P*Q
  int h0 = 0, w0 = 0;            // top-left corner of the column's receptive field
  int column, row;
  float regs[PER_THREAD];

  __device__ PatchLoader(const ConvParams& params, const int4* offsets, const float* x, int group,
                         int n0, int tid)
      : p(params), table(offsets), column(tid % BN), row(tid / BN) {
    const int j = n0 + column;
    if (j < p.N * p.PQ) {
      int n, pq, out_p, out_q;
      p.by_PQ.divmod(j, n, pq);
      p.by_Q.divmod(pq, out_p, out_q);
      image = x + (int64_t(n) * p.C + int64_t(group) * p.Cg) * p.HW;
      h0 = out_p * p.stride_h - p.pad_h;
      w0 = out_q * p.stride_w - p.pad_w;
    }
  }
  __device__ void fetch(int k0) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int crs = k0 + row + i * ROW_STEP;
      float v = 0.0f;
      if (image != nullptr && crs < p.CRS) {
        if constexpr (PRECOMPUTED) {
          const int4 e = __ldg(table + crs);
          const int h = h0 + e.y, w = w0 + e.z;
          if (unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W)) {
            v = image[e.x + h0 * p.W + w0];
          }
        } else {
          int c, rs, r, s;
          p.by_RS.divmod(crs, c, rs);
          p.by_S.divmod(rs, r, s);
          const int h = h0 + r * p.dilation_h, w = w0 + s * p.dilation_w;
          if (unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W)) {
            v = image[c * p.HW + h * p.W + w];
          }
        }
      }
      regs[i] = v;
    }
  }
  __device__ void stash(float (*slab)[BN + tile::kPad]) const {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) slab[row + i * ROW_STEP][column] = regs[i];
  }
};

// The block's GEMM over [0, k_end): the FFMA loop of kernels/tiles/block_tile.cuh in fp32, the
// tensor cores' in tf32 and bf16 (store then sees pairs of columns instead of up to four).
template <class Cfg, GemmMath MATH, class LoadA, class LoadB, class Store>
__device__ void block_gemm(LoadA& load_a, LoadB& load_b, int k_end, tile::SharedStorage<Cfg>& sm,
                           int m0, int n0, int M, int N, Store& store) {
  if constexpr (MATH == GemmMath::fp32) {
    const tile::ThreadTile<Cfg> t(threadIdx.x);
    float acc[Cfg::TM][Cfg::TN] = {};
    tile::accumulate(load_a, load_b, 0, k_end, sm, t, acc);
    tile::finish(sm, t, acc, m0, n0, M, N, store);
  } else {
    static_assert(std::is_same_v<Cfg, conv_mma::Tile>, "tensor cores run conv_mma's tile");
    conv_mma::gemm<MATH == GemmMath::bf16>(load_a, load_b, 0, k_end, sm, m0, n0, M, N, store);
  }
}

template <class Cfg, bool PRECOMPUTED, GemmMath MATH>
__global__ void __launch_bounds__(Cfg::THREADS)
    forward_kernel(ConvParams p, const int4* __restrict__ table, const float* __restrict__ x,
                   const float* __restrict__ w, const float* __restrict__ bias,
                   float* __restrict__ y, bool vec_w, bool vec_y) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const int tiles_m = (p.Kg + Cfg::BM - 1) / Cfg::BM;
  const int group = blockIdx.y / tiles_m;
  const int m0 = blockIdx.y % tiles_m * Cfg::BM, n0 = blockIdx.x * Cfg::BN;
  const int tid = threadIdx.x;
  tile::DenseLoader<Cfg::BM, Cfg::BK, Cfg::THREADS, true> load_w{
      w + int64_t(group) * p.Kg * p.CRS, p.CRS, m0, p.Kg, p.CRS, vec_w, tid};
  PatchLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, PRECOMPUTED> load_x(p, table, x, group, n0, tid);
  // Row m of the tile is output channel k; column j is (n, p, q): y[n, k, p, q] = acc + bias[k].
  auto store = [&](int m, int j, const float* v, int count) {
    const int k = group * p.Kg + m;
    const float b = bias != nullptr ? bias[k] : 0.0f;
    int n, pq;
    p.by_PQ.divmod(j, n, pq);
    if (count == 4 && vec_y) {  // P*Q % 4 == 0: the four stay in one image
      *reinterpret_cast<float4*>(y + (int64_t(n) * p.K + k) * p.PQ + pq) =
          make_float4(v[0] + b, v[1] + b, v[2] + b, v[3] + b);
      return;
    }
    if (count == 2 && vec_y) {  // j even (tensor cores' pairs), so the two stay in one image
      *reinterpret_cast<float2*>(y + (int64_t(n) * p.K + k) * p.PQ + pq) =
          make_float2(v[0] + b, v[1] + b);
      return;
    }
    for (int e = 0; e < count; ++e) {
      p.by_PQ.divmod(j + e, n, pq);
      y[(int64_t(n) * p.K + k) * p.PQ + pq] = v[e] + b;
    }
  };
  block_gemm<Cfg, MATH>(load_w, load_x, p.CRS, sm, m0, n0, p.Kg, p.N * p.PQ, store);
}

// ---- backward data: A = w_g^T [Cg, Kg*RS], B = dys_g [Kg*RS, N*HW] ----------------------------

// Thread t loads inner index k0 + t % BK of each slab (one (k, r, s): one division per slab) for
// channels t / BK + i * THREADS / BK. w is small and stays in L1/L2.
template <int BM, int BK, int THREADS>
struct TransposedFilterLoader {
  static constexpr int PER_THREAD = BM * BK / THREADS, ROW_STEP = THREADS / BK;
  static_assert(THREADS % BK == 0 && PER_THREAD * THREADS == BM * BK, "slab must split evenly");

  ConvParams p;
  const float* filters;  // w[g*Kg]
  int m0, inner, row;
  float regs[PER_THREAD];

  __device__ TransposedFilterLoader(const ConvParams& params, const float* w, int group, int m0_,
                                    int tid)
      : p(params),
        filters(w + int64_t(group) * p.Kg * p.CRS),
        m0(m0_),
        inner(tid % BK),
        row(tid / BK) {}
  __device__ void fetch(int k0) {
    const int krs = k0 + inner;
    const float* base = nullptr;  // w[g*Kg + k, 0, r, s]
    if (krs < p.Kg * p.RS) {
      int k, rs;
      p.by_RS.divmod(krs, k, rs);
      base = filters + k * p.CRS + rs;
    }
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int c = m0 + row + i * ROW_STEP;
      regs[i] = base != nullptr && c < p.Cg ? base[c * p.RS] : 0.0f;
    }
  }
  __device__ void stash(float (*slab)[BM + tile::kPad]) const {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) slab[inner][row + i * ROW_STEP] = regs[i];
  }
};

// Thread t always loads column n0 + t % BN (one input pixel (n, h, w)) and rows t / BN + i *
// THREADS / BN: the (k, r, s) whose output position (p, q) reads that pixel, if any.
template <int BN, int BK, int THREADS, bool PRECOMPUTED>
struct OutputGradientLoader {
  static constexpr int PER_THREAD = BK * BN / THREADS, ROW_STEP = THREADS / BN;
  static_assert(THREADS % BN == 0 && PER_THREAD * THREADS == BK * BN, "slab must split evenly");

  ConvParams p;
  const int4* table;             // v8: the (k, r, s) rows' offsets; v2: null
  const float* image = nullptr;  // dy[n, g*Kg] of this thread's pixel; null past N*H*W
  int hh = 0, ww = 0;            // the pixel's row and column in the padded image
  int column, row;
  float regs[PER_THREAD];

  __device__ OutputGradientLoader(const ConvParams& params, const int4* offsets, const float* dy,
                                  int group, int n0, int tid)
      : p(params), table(offsets), column(tid % BN), row(tid / BN) {
    const int j = n0 + column;
    if (j < p.N * p.HW) {
      int n, hw, h, w;
      p.by_HW.divmod(j, n, hw);
      p.by_W.divmod(hw, h, w);
      image = dy + (int64_t(n) * p.K + int64_t(group) * p.Kg) * p.PQ;
      hh = h + p.pad_h;
      ww = w + p.pad_w;
    }
  }
  __device__ void fetch(int k0) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int krs = k0 + row + i * ROW_STEP;
      float v = 0.0f;
      if (image != nullptr && krs < p.Kg * p.RS) {
        int channel, hp, wq;  // k*P*Q, and the tap's row and column in dy's padded grid
        if constexpr (PRECOMPUTED) {
          const int4 e = __ldg(table + krs);
          channel = e.x, hp = hh - e.y, wq = ww - e.z;
        } else {
          int k, rs, r, s;
          p.by_RS.divmod(krs, k, rs);
          p.by_S.divmod(rs, r, s);
          channel = k * p.PQ, hp = hh - r * p.dilation_h, wq = ww - s * p.dilation_w;
        }
        if (hp >= 0 && wq >= 0) {
          int out_p, rest_h, out_q, rest_w;
          p.by_stride_h.divmod(hp, out_p, rest_h);
          p.by_stride_w.divmod(wq, out_q, rest_w);
          if (rest_h == 0 && rest_w == 0 && out_p < p.P && out_q < p.Q) {
            v = image[channel + out_p * p.Q + out_q];
          }
        }
      }
      regs[i] = v;
    }
  }
  __device__ void stash(float (*slab)[BN + tile::kPad]) const {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) slab[row + i * ROW_STEP][column] = regs[i];
  }
};

template <class Cfg, bool PRECOMPUTED, GemmMath MATH>
__global__ void __launch_bounds__(Cfg::THREADS)
    backward_data_kernel(ConvParams p, const int4* __restrict__ table, const float* __restrict__ dy,
                         const float* __restrict__ w, float* __restrict__ dx, bool vec_dx) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const int tiles_m = (p.Cg + Cfg::BM - 1) / Cfg::BM;
  const int group = blockIdx.y / tiles_m;
  const int m0 = blockIdx.y % tiles_m * Cfg::BM, n0 = blockIdx.x * Cfg::BN;
  const int tid = threadIdx.x;
  TransposedFilterLoader<Cfg::BM, Cfg::BK, Cfg::THREADS> load_w(p, w, group, m0, tid);
  OutputGradientLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, PRECOMPUTED> load_dy(p, table, dy, group, n0,
                                                                            tid);
  // Row m of the tile is input channel g*Cg + m; column j is the pixel (n, h, w).
  auto store = [&](int m, int j, const float* v, int count) {
    const int c = group * p.Cg + m;
    int n, hw;
    p.by_HW.divmod(j, n, hw);
    if (count == 4 && vec_dx) {  // H*W % 4 == 0: the four stay in one image
      *reinterpret_cast<float4*>(dx + (int64_t(n) * p.C + c) * p.HW + hw) =
          make_float4(v[0], v[1], v[2], v[3]);
      return;
    }
    if (count == 2 && vec_dx) {  // j even (tensor cores' pairs), so the two stay in one image
      *reinterpret_cast<float2*>(dx + (int64_t(n) * p.C + c) * p.HW + hw) = make_float2(v[0], v[1]);
      return;
    }
    for (int e = 0; e < count; ++e) {
      p.by_HW.divmod(j + e, n, hw);
      dx[(int64_t(n) * p.C + c) * p.HW + hw] = v[e];
    }
  };
  block_gemm<Cfg, MATH>(load_w, load_dy, p.Kg * p.RS, sm, m0, n0, p.Cg, p.N * p.HW, store);
}

template <class Cfg, bool PRECOMPUTED, GemmMath MATH>
void launch_forward(const Conv2dGeometry& g, const ConvParams& p, const int4* table, const float* x,
                    const float* w, const float* bias, float* y, gpu::Stream stream) {
  const dim3 grid(unsigned((int64_t(p.N) * p.PQ + Cfg::BN - 1) / Cfg::BN),
                  grid_y(g, p.Kg, Cfg::BM));
  forward_kernel<Cfg, PRECOMPUTED, MATH><<<grid, Cfg::THREADS, 0, stream>>>(
      p, table, x, w, bias, y, aligned16(w) && p.CRS % 4 == 0, aligned16(y) && p.PQ % 4 == 0);
  gpu::check_launch("conv2d_forward (implicit GEMM)");
}

template <class Cfg, bool PRECOMPUTED, GemmMath MATH>
void launch_backward_data(const Conv2dGeometry& g, const ConvParams& p, const int4* table,
                          const float* dy, const float* w, float* dx, gpu::Stream stream) {
  const dim3 grid(unsigned((int64_t(p.N) * p.HW + Cfg::BN - 1) / Cfg::BN),
                  grid_y(g, p.Cg, Cfg::BM));
  backward_data_kernel<Cfg, PRECOMPUTED, MATH>
      <<<grid, Cfg::THREADS, 0, stream>>>(p, table, dy, w, dx, aligned16(dx) && p.HW % 4 == 0);
  gpu::check_launch("conv2d_backward_data (implicit GEMM)");
}

// The passes, tile and math chosen as v2 chooses them. `table` is v8's offset table (built by
// ladder/precomputed_gemm_cuda.cu in its workspace) when PRECOMPUTED, else null.
template <bool PRECOMPUTED>
void run_forward(const Conv2dGeometry& g, const ConvParams& p, const int4* table, const float* x,
                 const float* w, const float* bias, float* y, gpu::Stream stream, GemmMath math) {
  if (math == GemmMath::tf32) {
    return launch_forward<conv_mma::Tile, PRECOMPUTED, GemmMath::tf32>(g, p, table, x, w, bias, y,
                                                                       stream);
  }
  if (math == GemmMath::bf16) {
    return launch_forward<conv_mma::Tile, PRECOMPUTED, GemmMath::bf16>(g, p, table, x, w, bias, y,
                                                                       stream);
  }
  constexpr GemmMath fp32 = GemmMath::fp32;
  switch (tile::choose_tile(p.Kg, int64_t(p.N) * p.PQ, g.groups, tile::TileShape::small)) {
    case tile::TileShape::large:
      return launch_forward<tile::Large, PRECOMPUTED, fp32>(g, p, table, x, w, bias, y, stream);
    case tile::TileShape::medium:
      return launch_forward<tile::Medium, PRECOMPUTED, fp32>(g, p, table, x, w, bias, y, stream);
    default:
      return launch_forward<tile::Small, PRECOMPUTED, fp32>(g, p, table, x, w, bias, y, stream);
  }
}

template <bool PRECOMPUTED>
void run_backward_data(const Conv2dGeometry& g, const ConvParams& p, const int4* table,
                       const float* dy, const float* w, float* dx, gpu::Stream stream,
                       GemmMath math) {
  if (math == GemmMath::tf32) {
    return launch_backward_data<conv_mma::Tile, PRECOMPUTED, GemmMath::tf32>(g, p, table, dy, w, dx,
                                                                             stream);
  }
  if (math == GemmMath::bf16) {
    return launch_backward_data<conv_mma::Tile, PRECOMPUTED, GemmMath::bf16>(g, p, table, dy, w, dx,
                                                                             stream);
  }
  constexpr GemmMath fp32 = GemmMath::fp32;
  switch (tile::choose_tile(p.Cg, int64_t(p.N) * p.HW, g.groups, tile::TileShape::small)) {
    case tile::TileShape::large:
      return launch_backward_data<tile::Large, PRECOMPUTED, fp32>(g, p, table, dy, w, dx, stream);
    case tile::TileShape::medium:
      return launch_backward_data<tile::Medium, PRECOMPUTED, fp32>(g, p, table, dy, w, dx, stream);
    default:
      return launch_backward_data<tile::Small, PRECOMPUTED, fp32>(g, p, table, dy, w, dx, stream);
  }
}

}  // namespace crema::kernels::cuda::implicit_gemm
