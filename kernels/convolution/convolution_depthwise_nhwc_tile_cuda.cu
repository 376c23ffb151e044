// Depthwise NHWC convolution, forward and stride-1 backward data, v2: the halo tile
// (convolution_depthwise_nhwc.h lists the versions; the correlation is the one of
// convolution_depthwise_nhwc_cuda.cu's top, v1's file).
//
// Why: v1's threads read the input rows of their strips through L1/L2; each input row serves R
// output rows that lie in other blocks, so L2 hands each element to the SMs about R times, and a
// thread has only one row's loads in flight (~100 bytes). Here a block owns a tile of TP output
// rows x SPR*QT output columns of one image for a slab of CH channels and first copies the
// tile's whole input -- IH = (TP-1)*st + K rows x IW = (SPR*QT-1)*st + K columns x CH channels --
// into shared memory with cp.async (16 bytes a copy, every copy in flight at once; the padding
// outside the image zero-filled by the copy itself, so the walk below has no bounds checks).
// Then each thread walks its strip of QT outputs exactly as v1 does (each input row once across
// the strip, the row's taps in registers), reading shared memory. L2 hands each input element out
// IH*IW / (TP*SPR*QT*st^2) times: 1.2-1.6 for the zoo's 3x3 layers (v1: about R), 2.2-3 for their
// 5x5 and 7x7 (v1: about R); tile_plan picks TP and SPR.
//
// v3, pipelined: the same tiles, but kPipeBlocks blocks in all (about two an SM) each take tiles
// blockIdx.x, + gridDim.x, ... in turn with two tile buffers: the copies of the next tile fly
// while the current one is walked (v2's block waits for its copies, then walks with nothing in
// flight; other blocks on the SM hide some of that). Each buffer takes at most kPipeTileBytes.
//
// Takes: square K x K filters, K = 3, 5, 7; strides (1, 1) or (2, 2); no dilation; taps_in ==
// per_in == 1 (M == 1); 16-byte vectors (C a multiple of them, the tensors 16-byte aligned).
// The epilogue and the statistics are v1's (store_strip, block_stats): a block's row r is thread
// row r of its tiles, added tile after tile, so the sums' order depends on the geometry only.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/convolution/convolution_depthwise_nhwc.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::depthwise_nhwc {
namespace {

// Outputs a strip (registers: QT*V sums, K*V taps, as v1's kWalkQT); the most shared memory a
// tile takes in v2 and in each of v3's two buffers (two blocks an SM fit in 228 KB with the taps
// and the statistics' sums); v3's blocks (two an SM on an H100 or H200).
constexpr int kTileQT = 4;
constexpr size_t kTileBytes = 96 * 1024, kPipeTileBytes = 40 * 1024;
constexpr int kPipeBlocks = 2 * 132;

// A block's tile: spr strips a tile row, tp output rows; the tiles across the output; the input
// tile's rows and columns.
struct TilePlan {
  int spr, tp, tiles_q, tiles_p, ih, iw;
};

size_t vector_bytes(const Corr& c) {
  return size_t(c.tx) * 16;  // a pixel's CH channels: tx 16-byte vectors
}

// The tile's shape (within `budget` bytes): of the ways to cut a row's strips into equal pieces
// (spr strips a piece) with tp = ty / spr rows, the one that minimizes (input pixels copied /
// outputs) x (threads run / outputs): the L2 traffic a tile saves against the threads it leaves
// idle (a partial last tile, rows past P). 3x3 stride 1, 112 x 112 outputs, ty = 64: 16 x 16
// outputs a tile, 1.27 input pixels an output (a whole row, 2 x 112: 2.04).
TilePlan tile_plan(const Corr& c, size_t budget) {
  const int K = c.S, st = c.stride_w, QT = kTileQT;
  const int strips_row = (c.Q + QT - 1) / QT;
  TilePlan best{};
  double best_cost = 0;
  for (int spr = std::min(strips_row, c.ty); spr >= 1; --spr) {
    const int pieces = (strips_row + spr - 1) / spr;
    if ((strips_row + pieces - 1) / pieces != spr) continue;  // not an even cut
    TilePlan t{};
    t.spr = spr;
    t.tp = std::min(c.ty / spr, c.P);
    auto ih = [&](int tp) { return (tp - 1) * st + K; };
    const int iw = (spr * QT - 1) * st + K;
    while (t.tp > 1 && size_t(ih(t.tp)) * iw * vector_bytes(c) > budget) --t.tp;
    if (size_t(ih(t.tp)) * iw * vector_bytes(c) > budget) continue;
    t.ih = ih(t.tp), t.iw = iw;
    t.tiles_q = (c.Q + spr * QT - 1) / (spr * QT);
    t.tiles_p = (c.P + t.tp - 1) / t.tp;
    const double tiles = double(t.tiles_p) * t.tiles_q, outputs = double(c.P) * c.Q;
    const double cost = (tiles * t.ih * t.iw / outputs) * (tiles * double(c.ty) * QT / outputs);
    if (best.spr == 0 || cost < best_cost) best = t, best_cost = cost;
  }
  return best;
}

// The strip's QT outputs of V channels from the tile in shared memory: window points at the
// strip's first input column of the tile's row pi*ST (iw columns of CH channels a row), ws at
// the lane's taps ([tap][CH]); each input row walked once, its taps in registers (v1's walk).
template <class E, int V, int K, int ST, int QT>
__device__ __forceinline__ void walk_strip(const typename E::T* window, const float* ws, int CH,
                                           int iw, float (&acc)[QT][V]) {
#pragma unroll
  for (int r = 0; r < K; ++r) {
    float taps[K][V];
#pragma unroll
    for (int s = 0; s < K; ++s) read_shared<V>(ws + (r * K + s) * CH, taps[s]);
    const typename E::T* line = window + int64_t(r) * iw * CH;
#pragma unroll
    for (int j = 0; j < (QT - 1) * ST + K; ++j) {
      float xv[V];
      load_channels<E, V, false>(line + j * CH, xv);
#pragma unroll
      for (int qi = 0; qi < QT; ++qi) {
        const int s = j - qi * ST;
        if (s >= 0 && s < K) fma_channels<V>(acc[qi], taps[s], xv);
      }
    }
  }
}

// Copies tile `index` (image n, output rows p_first.., columns q_first..) of the slab o_first..
// into `tile` ([ih][iw][CH]): cp.async, 16 bytes a copy, zeros outside the image.
template <class T, int V, int ST, int QT>
__device__ __forceinline__ void copy_tile(const Corr& c, const TilePlan& t, int index, int o_first,
                                          const T* in, T* tile) {
  const int CH = c.tx * V;
  const int bq = index % t.tiles_q, rest = index / t.tiles_q;
  const int n = rest / t.tiles_p, p_first = rest % t.tiles_p * t.tp;
  const int h_first = p_first * ST - c.pad_h, w_first = bq * t.spr * QT * ST - c.pad_w;
  const T* image = in + int64_t(n) * c.H * c.W * c.Cin;
  const int copies = t.ih * t.iw * c.tx;
  for (int i = threadIdx.x; i < copies; i += blockDim.x) {
    const int lane = i % c.tx, pixel = i / c.tx;
    const int h = h_first + pixel / t.iw, col = w_first + pixel % t.iw, ch = o_first + lane * V;
    const bool inside = unsigned(h) < unsigned(c.H) && unsigned(col) < unsigned(c.W) && ch < c.Cin;
    const T* src = inside ? image + (int64_t(h) * c.W + col) * c.Cin + ch : in;
    detail::cp_async<16>(tile + int64_t(pixel) * CH + lane * V, src, inside ? 16 : 0);
  }
}

// The kernels' body. kPipe: v3 (tiles blockIdx.x, + gridDim.x, ... with two buffers), else v2
// (tile blockIdx.x).
template <class E, int V, int K, int ST, int QT, bool kPipe>
__device__ __forceinline__ void tile_body(const Corr& c, const TilePlan& t,
                                          const typename E::T* __restrict__ in,
                                          const typename E::T* __restrict__ w, typename E::T* out,
                                          const float* __restrict__ bias,
                                          const typename E::T* residual, bool relu,
                                          float* __restrict__ stats) {
  using T = typename E::T;
  static_assert(V * sizeof(T) == 16, "16-byte vectors");
  extern __shared__ __align__(16) float smem[];
  const int CH = c.tx * V, o_first = blockIdx.y * CH;
  const int taps_floats = (K * K * CH + 3) & ~3, tile_elements = t.ih * t.iw * CH;
  float* ws = smem;                                       // [tap][CH], fp32
  T* buffers = reinterpret_cast<T*>(smem + taps_floats);  // [1 or 2][ih][iw][CH]
  copy_tile<T, V, ST, QT>(c, t, blockIdx.x, o_first, in, buffers);
  detail::cp_async_commit();
  load_taps<E>(w, o_first, CH, c.Cout, 1, K * K, c.flip, ws);  // while the copies fly

  const int lane = threadIdx.x % c.tx, row = threadIdx.x / c.tx;
  const int pi = row / t.spr, si = row % t.spr, o0 = o_first + lane * V;
  float sum[V] = {}, squares[V] = {};
  // Walks tile `index` from `tile` and stores its outputs.
  auto walk = [&](int index, const T* tile) {
    const int bq = index % t.tiles_q, rest = index / t.tiles_q;
    const int n = rest / t.tiles_p, p = rest % t.tiles_p * t.tp + pi;
    const int q0 = bq * t.spr * QT + si * QT;
    if (pi >= t.tp || p >= c.P || q0 >= c.Q || o0 >= c.Cout) return;
    float acc[QT][V] = {};
    walk_strip<E, V, K, ST, QT>(tile + (int64_t(pi * ST) * t.iw + si * QT * ST) * CH + lane * V,
                                ws + lane * V, CH, t.iw, acc);
    store_strip<E, V, QT>(c, acc, n, p, q0, o0, out, bias, residual, relu, sum, squares);
  };
  if constexpr (!kPipe) {
    detail::cp_async_wait<0>();
    __syncthreads();
    walk(int(blockIdx.x), buffers);
  } else {
    const int tiles = int(c.rows / c.P) * t.tiles_p * t.tiles_q;
    int turn = 0;
    for (int index = blockIdx.x; index < tiles; index += gridDim.x, ++turn) {
      const int next = index + int(gridDim.x);
      if (next < tiles) {
        copy_tile<T, V, ST, QT>(c, t, next, o_first, in,
                                buffers + ((turn + 1) & 1) * tile_elements);
      }
      detail::cp_async_commit();   // (empty when nothing was copied)
      detail::cp_async_wait<1>();  // all but the newest group: this tile's copies
      __syncthreads();
      walk(index, buffers + (turn & 1) * tile_elements);
      __syncthreads();  // the walk is done with this buffer before it is copied into again
    }
  }
  if (stats == nullptr) return;
  const int buffer_floats = (kPipe ? 2 : 1) * tile_elements * int(sizeof(T)) / int(sizeof(float));
  block_stats<V>(c, lane, row, o_first, sum, squares, smem + taps_floats + buffer_floats, stats);
}

// v2 and v3. Their own launch bounds: v3 is held to 128 registers (two blocks an SM, what
// kPipeBlocks counts on); v2 is left to ptxas's default heuristics, which use fewer registers
// here than a bound of one block an SM (55-123 against 92-139), so more blocks fit an SM.
template <class E, int V, int K, int ST, int QT>
__global__ void __launch_bounds__(kBlockThreads)
    tile_kernel(Corr c, TilePlan t, const typename E::T* __restrict__ in,
                const typename E::T* __restrict__ w, typename E::T* out,
                const float* __restrict__ bias, const typename E::T* residual, bool relu,
                float* __restrict__ stats) {
  tile_body<E, V, K, ST, QT, false>(c, t, in, w, out, bias, residual, relu, stats);
}
template <class E, int V, int K, int ST, int QT>
__global__ void __launch_bounds__(kBlockThreads, 2)
    pipelined_tile_kernel(Corr c, TilePlan t, const typename E::T* __restrict__ in,
                          const typename E::T* __restrict__ w, typename E::T* out,
                          const float* __restrict__ bias, const typename E::T* residual, bool relu,
                          float* __restrict__ stats) {
  tile_body<E, V, K, ST, QT, true>(c, t, in, w, out, bias, residual, relu, stats);
}

// The plan of v2 (pipelined false) or v3, and its grid's blocks across the output.
TilePlan plan_of(const Corr& c, bool pipelined) {
  return tile_plan(c, pipelined ? kPipeTileBytes : kTileBytes);
}
int64_t grid_x(const Corr& c, const TilePlan& t, int V, bool pipelined) {
  const int64_t tiles = int64_t(c.rows / c.P) * t.tiles_p * t.tiles_q;
  if (!pipelined) return tiles;
  const int64_t slabs = (c.Cout / V + c.tx - 1) / c.tx;
  return std::clamp<int64_t>(kPipeBlocks / slabs, 1, tiles);
}

template <class E, int K, int ST, bool kPipe>
void launch(const Corr& c, const void* in, const void* w, void* out, const TcEpilogue& ep,
            float* stats, gpu::Stream stream, const char* what) {
  using T = typename E::T;
  constexpr int V = E::kVec;
  const TilePlan t = plan_of(c, kPipe);
  const int CH = c.tx * V;
  const size_t smem = size_t((K * K * CH + 3) & ~3) * sizeof(float) +
                      (kPipe ? 2 : 1) * size_t(t.ih) * t.iw * vector_bytes(c) +
                      (stats != nullptr ? 2 * size_t(c.ty) * CH * sizeof(float) : 0);
  const auto kernel =
      kPipe ? pipelined_tile_kernel<E, V, K, ST, kTileQT> : tile_kernel<E, V, K, ST, kTileQT>;
  if (smem > 48 * 1024) detail::set_shared_memory_limit(kernel, int(smem), what);
  const int64_t tiles = int64_t(c.rows / c.P) * t.tiles_p * t.tiles_q;
  const int64_t slabs = (c.Cout / V + c.tx - 1) / c.tx;
  if (tiles > INT32_MAX || slabs > 65535) {
    throw Error(std::string(what) + " (depthwise, nhwc, halo tile): " + std::to_string(c.Cout) +
                " channels of " + std::to_string(tiles) + " tiles are too many blocks");
  }
  const dim3 grid(unsigned(grid_x(c, t, V, kPipe)), unsigned(slabs));
  kernel<<<grid, unsigned(c.tx * c.ty), smem, stream>>>(
      c, t, static_cast<const T*>(in), static_cast<const T*>(w), static_cast<T*>(out), ep.bias,
      static_cast<const T*>(ep.residual), ep.relu, stats);
  gpu::check_launch(what);
}

template <class E, bool kPipe>
void correlate_piped(const Corr& c, const void* in, const void* w, void* out, const TcEpilogue& ep,
                     float* stats, gpu::Stream stream, const char* what) {
  const bool one = c.stride_w == 1;
  switch (c.S) {
    case 3:
      return one ? launch<E, 3, 1, kPipe>(c, in, w, out, ep, stats, stream, what)
                 : launch<E, 3, 2, kPipe>(c, in, w, out, ep, stats, stream, what);
    case 5:
      return one ? launch<E, 5, 1, kPipe>(c, in, w, out, ep, stats, stream, what)
                 : launch<E, 5, 2, kPipe>(c, in, w, out, ep, stats, stream, what);
    default:
      return one ? launch<E, 7, 1, kPipe>(c, in, w, out, ep, stats, stream, what)
                 : launch<E, 7, 2, kPipe>(c, in, w, out, ep, stats, stream, what);
  }
}

template <class E>
void correlate_typed(const Corr& c, const void* in, const void* w, void* out, const TcEpilogue& ep,
                     float* stats, bool pipelined, gpu::Stream stream, const char* what) {
  return pipelined ? correlate_piped<E, true>(c, in, w, out, ep, stats, stream, what)
                   : correlate_piped<E, false>(c, in, w, out, ep, stats, stream, what);
}

}  // namespace

bool tile_fits(const Corr& c, int V) {
  return V > 1 && c.taps_in == 1 && c.per_in == 1 && c.R == c.S &&
         (c.S == 3 || c.S == 5 || c.S == 7) && c.stride_h == c.stride_w &&
         (c.stride_w == 1 || c.stride_w == 2) && c.dil_h == 1 && c.dil_w == 1;
}

int64_t tile_blocks(const Corr& c, int V, bool pipelined) {
  return grid_x(c, plan_of(c, pipelined), V, pipelined);
}

void correlate_tile(Element type, const Corr& c, const void* in, const void* w, void* out,
                    const TcEpilogue& ep, float* stats, bool pipelined, gpu::Stream stream,
                    const char* what) {
  switch (type) {
    case Element::f32:
      return correlate_typed<F32>(c, in, w, out, ep, stats, pipelined, stream, what);
    case Element::bf16:
      return correlate_typed<Bf16>(c, in, w, out, ep, stats, pipelined, stream, what);
    case Element::f16:
      return correlate_typed<F16>(c, in, w, out, ep, stats, pipelined, stream, what);
  }
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
