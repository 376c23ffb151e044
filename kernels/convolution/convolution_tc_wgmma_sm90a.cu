// Forward and backward data of the 1x1 convolutions on 16-bit NHWC tensors on Hopper: warpgroup
// MMA (wgmma) fed by the copy engine (TMA) through an mbarrier ring, as the GEMM's t4
// (kernels/gemm/gemm_wgmma_pipelined_sm90a.cu); the kernel and the ring are
// convolution_tc_wgmma.cuh's, this file their two Problems. Compiled for sm_90a alone
// (CMakeLists.txt); convolution_tc_cuda.cu calls it on a device of compute capability 9.0 for the
// geometries it fits, the mma.sync kernels otherwise. A pointwise convolution is a GEMM whose
// operands are the tensors themselves, channels contiguous (K-major, as wgmma reads them and TMA
// copies them: no repacking):
//
//   forward  y[N*P*Q, K]   = xs[N*P*Q, C] * w[K, C]^T, then bias, residual, ReLU, one rounding
//            (TcEpilogue), and optionally each warp's partial channel sums of y and y^2
//   data     dxs[N*P*Q, C] = dy[N*P*Q, K] * wt[C, K]^T  (wt: w transposed once into the workspace
//            by convolution_tc_cuda.cu), the pixels between the strided ones written as zeros
//
// where xs and dxs are x and dx at the pixels (n, p*stride_h, q*stride_w): the whole tensor at
// stride 1. What fits (wgmma_*_fits): groups 1, a 1x1 filter, no padding, C and K multiples of 8
// (a tensor map's rows are whole 16-byte units, outputs whole pairs).
//
//   block tile 128 x BN (BN 128; 64 when the GEMM has at most 64 columns), k slab 64 channels:
//   4 wgmma m64nBNk16 a slab per warpgroup; two blocks an SM, so that one block's epilogue runs
//   under the other's copies (ResNet's 1x1 layers have 1 to 32 slabs: the prologue and epilogue
//   are a large part of a block's life)
//
// A's rows. Stride 1: the flat view x[N*H*W, C] (a 2-D map, boxes of 128 rows). Strided: a 4-D map
// over x's strided view {C, Q, P, N} (element strides 1, s_w C, s_h W C, H W C); a box is box_p =
// 128 / Q whole output rows (a tile of rows (p, q) in order: 87.5% of 128 at Q = 28, 98% at 14 and
// 7); the rows past box_p * Q hold stale data and are never stored. Rows and channels past the
// tensor are zero-filled by the TMA; the epilogue skips rows past N*P*Q and columns past the
// GEMM's. The channel sums: each warp's 16 rows in a fixed butterfly, then channel_stats_kernel
// over the warps in order: deterministic.
#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's signature; reached through cudart
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"

namespace crema::kernels::cuda::tc {
namespace {

using wg::kBM, wg::kRowBytes, wg::kSlab;

// The GEMM's rows (output pixels m = n*P*Q + p*Q + q) of each row tile, and A's box for it. The
// strided forward's tile is box_p whole output rows of one image, or of the images stacked when
// they stack evenly (H = stride_h * P: pixel (n, p*stride_h) is row n*P + p of a single image of
// N*P rows, 18 rows of 7 a tile instead of 7).
struct Rows {
  int M, P, Q;          // P: N*P when the images are stacked
  int box_p;            // strided: output rows a tile (0: flat, 128 pixels a tile)
  int tiles_per_image;  // strided: ceil(P / box_p)
  int tiles;            // row tiles in all

  // Tile `tile`'s row i as its output pixel, -1 where there is none.
  __device__ int at(int tile, int i) const {
    if (box_p == 0) {
      const int m = tile * kBM + i;
      return m < M ? m : -1;
    }
    const int n = tile / tiles_per_image, p = tile % tiles_per_image * box_p + i / Q;
    return i < box_p * Q && p < P ? (n * P + p) * Q + i % Q : -1;
  }
  __host__ __device__ uint32_t a_bytes() const {
    return uint32_t(box_p == 0 ? kBM : box_p * Q) * kRowBytes;
  }
  // Asks for channels k0 .. k0+63 of the tile's rows.
  __device__ void load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int k0, int tile) const {
    if (box_p == 0) {
      wg::tma_load_2d(dst, map, bar, k0, tile * kBM);
    } else {
      wg::tma_load_4d(dst, map, bar, k0, 0, tile % tiles_per_image * box_p, tile / tiles_per_image);
    }
  }
};

// Forward: y[m, k] = act(acc + bias[k] + residual[m, k]) rounded once (residual may be y: each
// pair is read, then written, by the thread that owns it).
template <class E, bool STATS>
struct ForwardOut {
  static constexpr bool kStats = STATS;
  int K;
  const float* bias;
  const uint16_t* residual;
  bool relu;
  uint16_t* y;
  float* stats;  // [rows][2][K]

  using Row = int64_t;  // the pixel's first element
  __device__ Row row(int m) const { return int64_t(m) * K; }
  // Channels k, k+1; returns the two values as stored.
  __device__ float2 store(Row at, int k, float v0, float v1) const {
    if (bias != nullptr) v0 += bias[k], v1 += bias[k + 1];
    if (residual != nullptr) {
      const uint32_t r = *reinterpret_cast<const uint32_t*>(residual + at + k);
      v0 += E::widen(uint16_t(r & 0xffffu)), v1 += E::widen(uint16_t(r >> 16));
    }
    if (relu) v0 = fmaxf(v0, 0.0f), v1 = fmaxf(v1, 0.0f);
    const uint32_t pair = E::pack(v0, v1);
    *reinterpret_cast<uint32_t*>(y + at + k) = pair;
    return make_float2(E::widen(uint16_t(pair & 0xffffu)), E::widen(uint16_t(pair >> 16)));
  }
  __device__ void store_stats(int row, int k, float2 sum, float2 squares) const {
    float* first = stats + int64_t(row) * 2 * K + k;
    first[0] = sum.x, first[1] = sum.y, first[K] = squares.x, first[K + 1] = squares.y;
  }
};

// Backward data: dx at pixel (n, p*stride_h, q*stride_w) = acc rounded once; the other pixels of
// its stride_h x stride_w block (inside the image) = 0. At stride 1 the block is the pixel.
template <class E>
struct DataOut {
  static constexpr bool kStats = false;
  int C, H, W, P, Q, stride_h, stride_w;
  uint16_t* dx;

  struct Row {
    int64_t at;      // the strided pixel's first element
    int rows, cols;  // the block's extent inside the image
  };
  __device__ Row row(int m) const {
    const int n = m / (P * Q), pq = m % (P * Q), h = pq / Q * stride_h, w = pq % Q * stride_w;
    return {(int64_t(n) * H * W + int64_t(h) * W + w) * C, min(stride_h, H - h),
            min(stride_w, W - w)};
  }
  __device__ float2 store(const Row& r, int c, float v0, float v1) const {
    const uint32_t pair = E::pack(v0, v1);
    for (int a = 0; a < r.rows; ++a) {
      for (int b = 0; b < r.cols; ++b) {
        *reinterpret_cast<uint32_t*>(dx + r.at + (int64_t(a) * W + b) * C + c) =
            a == 0 && b == 0 ? pair : 0u;
      }
    }
    return make_float2(0.0f, 0.0f);
  }
  __device__ void store_stats(int, int, float2, float2) const {}
};

// The GEMM C[rows, columns] = A[rows, inner] * B[columns, inner]^T, both K-major: A's rows as
// `rows` says, B the flat [columns, inner] matrix; `out` finishes C. Blocks walk the tiles in
// grouped_tile's order.
template <int BN, class Out>
struct PointwiseProblem {
  static constexpr bool kMnMajor = false;
  Rows rows;
  int columns, inner;
  Out out;

  __device__ detail::TileCoord locate() const {
    return detail::grouped_tile(blockIdx.x, rows.tiles, (columns + BN - 1) / BN, 8);
  }
  __device__ int slabs(detail::TileCoord) const { return (inner + kSlab - 1) / kSlab; }
  __device__ void fill(detail::TileCoord tile, int slab, uint32_t stage, uint32_t bar,
                       const CUtensorMap* map_a, const CUtensorMap* map_b) const {
    wg::mbarrier_arrive_expect_tx(bar, rows.a_bytes() + wg::Ring<BN>::B_BYTES);
    rows.load(stage, map_a, bar, slab * kSlab, tile.m);
    wg::tma_load_2d(stage + wg::Ring<BN>::A_BYTES, map_b, bar, slab * kSlab, tile.n * BN);
  }

  // Thread (warp w, lane l) of warpgroup `consumer` holds rows 16w + l/4 and +8 of its 64,
  // columns 8j + 2(l%4), +1: values 4j, 4j+1 and 4j+2, 4j+3.
  __device__ void store(detail::TileCoord tile, int consumer, const float (&acc)[BN / 2]) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const int r0 = consumer * 64 + warp * 16 + lane / 4;
    const int m0 = rows.at(tile.m, r0), m1 = rows.at(tile.m, r0 + 8);
    const typename Out::Row row0 = out.row(max(m0, 0)), row1 = out.row(max(m1, 0));
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int n = tile.n * BN + 8 * j + 2 * (lane % 4);
      float2 a = make_float2(0.0f, 0.0f), b = a;
      if (n < columns) {  // columns is a multiple of 8: n + 1 too
        if (m0 >= 0) a = out.store(row0, n, acc[4 * j], acc[4 * j + 1]);
        if (m1 >= 0) b = out.store(row1, n, acc[4 * j + 2], acc[4 * j + 3]);
      }
      if constexpr (Out::kStats) {
        // The 8 lanes of one l%4 hold the warp's 16 rows of these columns: a fixed butterfly.
        float2 sum = make_float2(a.x + b.x, a.y + b.y);
        float2 squares = make_float2(a.x * a.x + b.x * b.x, a.y * a.y + b.y * b.y);
#pragma unroll
        for (int mask = 4; mask < 32; mask *= 2) {
          sum.x += __shfl_xor_sync(0xffffffffu, sum.x, mask);
          sum.y += __shfl_xor_sync(0xffffffffu, sum.y, mask);
          squares.x += __shfl_xor_sync(0xffffffffu, squares.x, mask);
          squares.y += __shfl_xor_sync(0xffffffffu, squares.y, mask);
        }
        if (lane < 4 && n < columns) {
          out.store_stats(tile.m * 8 + consumer * 4 + warp, n, sum, squares);
        }
      }
    }
  }
};

// Runs the problem with BN 128, or 64 when it has at most 64 columns.
template <class E, class Out>
void run(const CUtensorMap& map_a, const void* b, TcType type, const Rows& rows, int columns,
         int inner, const Out& out, gpu::Stream stream, const char* what) {
  auto go = [&](auto bn) {
    constexpr int BN = decltype(bn)::value;
    const CUtensorMap map_b = wg::matrix_map(type, b, columns, inner, BN);
    const PointwiseProblem<BN, Out> problem{rows, columns, inner, out};
    const dim3 grid(unsigned(int64_t(rows.tiles) * ((columns + BN - 1) / BN)));
    wg::launch<E, BN>(map_a, map_b, problem, grid, stream, what);
  };
  columns > 64 ? go(std::integral_constant<int, 128>{}) : go(std::integral_constant<int, 64>{});
}

// The forward's rows: flat at stride 1, whole output rows a tile otherwise.
Rows forward_rows(const Conv2dGeometry& g) {
  const int P = int(g.P()), Q = int(g.Q()), M = int(g.N) * P * Q;
  if (g.stride_h == 1 && g.stride_w == 1) return {M, P, Q, 0, 0, (M + kBM - 1) / kBM};
  const bool stacked = g.H == g.stride_h * P;
  const int images = stacked ? 1 : int(g.N), rows_per_image = stacked ? int(g.N) * P : P;
  const int box_p = std::min(kBM / Q, rows_per_image);
  const int per_image = (rows_per_image + box_p - 1) / box_p;
  return {M, rows_per_image, Q, box_p, per_image, images * per_image};
}

bool pointwise_fits(const Conv2dGeometry& g) {
  return g.groups == 1 && g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0 && g.C % 8 == 0 &&
         g.K % 8 == 0;
}

template <class E, bool STATS>
void forward_typed(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
                   const TcEpilogue& ep, float* stats, gpu::Stream stream) {
  const Rows rows = forward_rows(g);
  CUtensorMap map_a;
  if (rows.box_p == 0) {
    map_a = wg::matrix_map(type, x, rows.M, g.C, kBM);
  } else {
    // x's strided view {C, Q, P, images}: pixel (n, p*stride_h, q*stride_w) (stacked images:
    // one image of N*P rows, each stride_h*W pixels apart).
    const cuuint64_t dims[4] = {cuuint64_t(g.C), cuuint64_t(rows.Q), cuuint64_t(rows.P),
                                cuuint64_t(rows.tiles / rows.tiles_per_image)};
    const cuuint64_t strides[3] = {cuuint64_t(g.stride_w * g.C * 2),
                                   cuuint64_t(g.stride_h * g.W * g.C * 2),
                                   cuuint64_t(g.H * g.W * g.C * 2)};
    const cuuint32_t box[4] = {cuuint32_t(kSlab), cuuint32_t(rows.Q), cuuint32_t(rows.box_p), 1};
    map_a = wg::tensor_map(type, x, 4, dims, strides, box);
  }
  const ForwardOut<E, STATS> out{int(g.K),
                                 ep.bias,
                                 static_cast<const uint16_t*>(ep.residual),
                                 ep.relu,
                                 static_cast<uint16_t*>(y),
                                 stats};
  run<E>(map_a, w, type, rows, int(g.K), int(g.C), out, stream, "conv2d_tc_forward (wgmma)");
}

template <class E>
void data_typed(const Conv2dGeometry& g, TcType type, const void* dy, const void* wt, void* dx,
                gpu::Stream stream) {
  const int P = int(g.P()), Q = int(g.Q()), M = int(g.N) * P * Q, K = int(g.K), C = int(g.C);
  const Rows rows{M, P, Q, 0, 0, (M + kBM - 1) / kBM};
  const CUtensorMap map_a = wg::matrix_map(type, dy, M, K, kBM);
  const DataOut<E> out{C, int(g.H),        int(g.W),        P,
                       Q, int(g.stride_h), int(g.stride_w), static_cast<uint16_t*>(dx)};
  run<E>(map_a, wt, type, rows, C, K, out, stream, "conv2d_tc_backward_data (wgmma)");
}

}  // namespace

// Strided: a box holds whole output rows (Q <= 128), and the strided view's dimensions do not
// overlap (stride_w * Q <= stride_h * W: an output row's pixels span less than the step to the
// next; only an asymmetric stride can break it).
bool wgmma_forward_fits(const Conv2dGeometry& g) {
  return pointwise_fits(g) && ((g.stride_h == 1 && g.stride_w == 1) ||
                               (g.Q() <= kBM && g.stride_w * g.Q() <= g.stride_h * g.W));
}

bool wgmma_backward_data_fits(const Conv2dGeometry& g) {
  return pointwise_fits(g);
}

int wgmma_forward_stats_rows(const Conv2dGeometry& g) {
  return forward_rows(g).tiles * 8;
}

void wgmma_forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
                   const TcEpilogue& epilogue, float* stats, gpu::Stream stream) {
  const bool with_stats = epilogue.sum != nullptr;
  if (type == TcType::bf16) {
    with_stats ? forward_typed<Bf16, true>(g, type, x, w, y, epilogue, stats, stream)
               : forward_typed<Bf16, false>(g, type, x, w, y, epilogue, stats, stream);
  } else {
    with_stats ? forward_typed<F16, true>(g, type, x, w, y, epilogue, stats, stream)
               : forward_typed<F16, false>(g, type, x, w, y, epilogue, stats, stream);
  }
}

void wgmma_backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* wt,
                         void* dx, gpu::Stream stream) {
  if (type == TcType::bf16) {
    data_typed<Bf16>(g, type, dy, wt, dx, stream);
  } else {
    data_typed<F16>(g, type, dy, wt, dx, stream);
  }
}

}  // namespace crema::kernels::cuda::tc
