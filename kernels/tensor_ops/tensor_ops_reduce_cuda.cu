// reduce-tensor, CUDA. Two versions (ReduceTensorVersion, tensor_ops.h):
//
//   block_per_output  one block per output (grid-stride over outputs); thread t accumulates
//                     reduced elements t, t + 256, ... in double, then the block combines its 256
//                     partials in a fixed shared-memory tree. One output of 10^7 elements is one
//                     block on one SM: 135 ms for the amax of 51M floats on an H200.
//   split             each output's reduced range is cut into S chunks, S from the sizes alone:
//                       lanes along r  (the reduced walk's innermost stride is 1 and its run at
//                                      least a warp: sum over H x W, amax over everything) a warp
//                                      per (output, chunk of 8192), 16-byte loads where the rows
//                                      are aligned, the lanes combined by a fixed butterfly;
//                       lanes along o  (otherwise: the innermost axis is kept, or the reduced run
//                                      is short) a thread per (output, chunk), neighbouring
//                                      threads on neighbouring outputs (coalesced), S chosen so
//                                      that about 2^18 threads run;
//                     with S = 1 the unit writes its output; otherwise it stores a partial in the
//                     workspace and a second kernel combines each output's S partials, a warp per
//                     output (lane l takes chunks l, l + 32, ..., then the butterfly), or a block
//                     per output from 512 partials on (then the 8 warps in order).
//
// Both are deterministic: every element is combined by a fixed unit in a fixed order, so the
// same inputs give the same bits on every run, grid and device (no atomics). Sums accumulate in
// double; max, min and amax compare in float (exact: the result is one of the elements) and
// keep the smallest flat reduced index on ties, so any combining order reports the first
// occurrence. A NaN element never wins a comparison (reduce_combine keeps the partial it has),
// as in the reference.
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::cuda {
namespace {

using detail::Reduced;

constexpr int kReduceThreads = 256;
constexpr int kWarpsPerBlock = kReduceThreads / 32;
// Lanes along r: a warp reduces a chunk of a multiple of kWarpChunk elements (a multiple of 4, so
// every chunk of a 16-byte-aligned row starts 16-byte aligned: one round of four float4 loads per
// lane), as few multiples as give about kTargetUnits (output, chunk) units over the whole tensor:
// the amax of 51M floats is 4182 warps of 12288 elements, one wave on an H100/H200 (a unit per
// warp; more, shorter chunks would lengthen the combine, fewer leave a second, mostly idle wave).
constexpr int64_t kWarpChunk = 2048;
constexpr int64_t kTargetUnits = 4096;
// Lanes along o: at least this many elements per thread, and about kTargetThreads threads.
constexpr int64_t kThreadChunk = 128;
constexpr int64_t kTargetThreads = int64_t(1) << 18;
constexpr int64_t kMaxBlocks = 65535;

// ---- block_per_output -----------------------------------------------------------------------

__global__ void reduce_block_per_output(ReduceOp op, ReducePlan plan, float alpha, const float* x,
                                        float beta, float* y, float* indices) {
  __shared__ double values[kReduceThreads];
  __shared__ long long index_of[kReduceThreads];
  const int t = int(threadIdx.x);
  for (int64_t o = blockIdx.x; o < plan.outputs; o += gridDim.x) {
    const float* xo = x + offset_of(plan.kept, o);
    Reduced<double> acc = detail::reduce_identity<double>(op);
    for (int64_t r = t; r < plan.reduced_count; r += kReduceThreads) {
      const double v = detail::reduce_lift<double>(op, double(xo[offset_of(plan.reduced, r)]));
      acc = detail::reduce_combine<double>(op, acc, {v, r});
    }
    values[t] = acc.value;
    index_of[t] = acc.index;
    __syncthreads();
    for (int half = kReduceThreads / 2; half > 0; half /= 2) {
      if (t < half) {
        const Reduced<double> merged = detail::reduce_combine<double>(
            op, {values[t], index_of[t]}, {values[t + half], index_of[t + half]});
        values[t] = merged.value;
        index_of[t] = merged.index;
      }
      __syncthreads();
    }
    if (t == 0) {
      const double value = detail::reduce_finish(op, values[0], plan.reduced_count);
      y[o] = detail::blend(alpha, float(value), beta, y[o]);
      if (indices != nullptr) indices[o] = float(plan.reduced_count == 0 ? 0 : index_of[0]);
    }
    __syncthreads();  // the arrays are reused by the next output
  }
}

// ---- split ------------------------------------------------------------------------------------

// The accumulator of kOp: float where the result is one of the elements (exact), double for the
// sums and products.
template <ReduceOp kOp>
using Acc =
    std::conditional_t<kOp == ReduceOp::max || kOp == ReduceOp::min || kOp == ReduceOp::amax, float,
                       double>;

// What the split kernels share: the plan, the chunking and the outputs.
struct Split {
  ReducePlan plan;
  int64_t chunk;  // reduced elements per unit
  int64_t S;      // units (chunks) per output
  float alpha, beta;
  float* y;
  float* indices;
  Reduced<double>* partials;  // [outputs, S] when S > 1
};

template <ReduceOp kOp, class A>
__device__ inline void add_element(Reduced<A>& acc, float v, int64_t r) {
  acc = detail::reduce_combine<A>(kOp, acc, {detail::reduce_lift<A>(kOp, A(v)), r});
}

// The fixed xor butterfly over the warp; lane 0's result is the one used.
template <ReduceOp kOp, class A>
__device__ inline Reduced<A> warp_combine(Reduced<A> acc) {
  for (int offset = 16; offset > 0; offset /= 2) {
    Reduced<A> other;
    other.value = __shfl_xor_sync(0xffffffffu, acc.value, offset);
    other.index = __shfl_xor_sync(0xffffffffu, (long long)acc.index, offset);
    acc = detail::reduce_combine<A>(kOp, acc, other);
  }
  return acc;
}

// Output o from its complete reduction: y blended, the index written unblended.
template <ReduceOp kOp>
__device__ inline void write_output(const Split& p, int64_t o, Reduced<double> acc) {
  const int64_t count = p.plan.reduced_count;
  const double value = detail::reduce_finish(kOp, acc.value, count);
  p.y[o] = detail::blend(p.alpha, float(value), p.beta, p.y[o]);
  if (p.indices != nullptr) p.indices[o] = float(count == 0 ? 0 : acc.index);
}

// Unit u = (o, s) is done: write output o (S = 1) or its partial s.
template <ReduceOp kOp, class A>
__device__ inline void finish_unit(const Split& p, int64_t o, int64_t s, Reduced<A> acc) {
  const Reduced<double> wide{double(acc.value), acc.index};
  if (p.S == 1) {
    write_output<kOp>(p, o, wide);
  } else {
    p.partials[o * p.S + s] = wide;
  }
}

// The offset of reduced element r from its output's first element.
__device__ inline int64_t reduced_offset(const IndexMap& m, int64_t r) {
  return m.ndim == 1 ? r * m.stride[0] : offset_of(m, r);
}

// Lanes along r: warp w takes units u = w, w + warps, ... with o = u / S, s = u % S; lane l
// takes the chunk's elements l, l + 32, ... (float4 k = l, l + 32, ... when `vectors`: the
// reduced run is contiguous, its length a multiple of 4 and x 16-byte aligned).
// At least 4 blocks (32 warps) per SM: the 4182 units of the 51M amax in one wave of 132 SMs.
template <ReduceOp kOp>
__global__ void __launch_bounds__(kReduceThreads, 4)
    reduce_lanes_along_r(Split p, const float* __restrict__ x, bool vectors) {
  using A = Acc<kOp>;
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  const int64_t units = p.plan.outputs * p.S, count = p.plan.reduced_count;
  for (int64_t u = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; u < units; u += warps) {
    const int64_t o = u / p.S, s = u - o * p.S;
    const int64_t begin = s * p.chunk, end = begin + p.chunk < count ? begin + p.chunk : count;
    const float* xo = x + offset_of(p.plan.kept, o);
    Reduced<A> acc = detail::reduce_identity<A>(kOp);
    if (vectors) {
      const float4* v = reinterpret_cast<const float4*>(xo + begin);
      const int64_t nv = (end - begin) / 4;
      int64_t k = lane;
      for (; k + 96 < nv; k += 128) {  // four loads in flight, then their elements in order
        float4 q[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) q[j] = v[k + 32 * j];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t r = begin + 4 * (k + 32 * j);
          add_element<kOp>(acc, q[j].x, r);
          add_element<kOp>(acc, q[j].y, r + 1);
          add_element<kOp>(acc, q[j].z, r + 2);
          add_element<kOp>(acc, q[j].w, r + 3);
        }
      }
      for (; k < nv; k += 32) {
        const float4 q = v[k];
        const int64_t r = begin + 4 * k;
        add_element<kOp>(acc, q.x, r);
        add_element<kOp>(acc, q.y, r + 1);
        add_element<kOp>(acc, q.z, r + 2);
        add_element<kOp>(acc, q.w, r + 3);
      }
      // A chunk's length is a multiple of 4 except an output's last; its 0-3 leftovers:
      for (int64_t r = begin + 4 * nv + lane; r < end; r += 32) add_element<kOp>(acc, xo[r], r);
    } else {
#pragma unroll 4
      for (int64_t r = begin + lane; r < end; r += 32) {
        add_element<kOp>(acc, xo[reduced_offset(p.plan.reduced, r)], r);
      }
    }
    acc = warp_combine<kOp>(acc);
    if (lane == 0) finish_unit<kOp>(p, o, s, acc);
  }
}

// Lanes along o: thread i takes units u = i, i + threads, ... with s = u / outputs and
// o = u % outputs (neighbouring threads on neighbouring outputs), walking its chunk in order.
template <ReduceOp kOp>
__global__ void reduce_lanes_along_o(Split p, const float* __restrict__ x) {
  using A = Acc<kOp>;
  const int64_t units = p.plan.outputs * p.S, count = p.plan.reduced_count;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = u / p.plan.outputs, o = u - s * p.plan.outputs;
    const int64_t begin = s * p.chunk, end = begin + p.chunk < count ? begin + p.chunk : count;
    const float* xo = x + offset_of(p.plan.kept, o);
    Reduced<A> acc = detail::reduce_identity<A>(kOp);
#pragma unroll 4
    for (int64_t r = begin; r < end; ++r) {
      add_element<kOp>(acc, xo[reduced_offset(p.plan.reduced, r)], r);
    }
    finish_unit<kOp>(p, o, s, acc);
  }
}

// The second pass, for output o: thread t of its `threads` (a warp, or the block when S is
// large: one output of 51M elements leaves 6272 partials) combines partials t, t + threads, ...
// in order, eight loads in flight, then the threads' results are combined in a fixed tree.
template <ReduceOp kOp>
__device__ inline Reduced<double> combine_strided(const Split& p, int64_t o, int t, int threads) {
  constexpr int kInFlight = 8;
  const Reduced<double>* row = p.partials + o * p.S;
  Reduced<double> acc = detail::reduce_identity<double>(kOp);
  for (int64_t s0 = t; s0 < p.S; s0 += int64_t(threads) * kInFlight) {
    Reduced<double> q[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int64_t s = s0 + int64_t(j) * threads;
      q[j] = s < p.S ? row[s] : detail::reduce_identity<double>(kOp);
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) acc = detail::reduce_combine<double>(kOp, acc, q[j]);
  }
  return acc;
}

// A warp per output.
template <ReduceOp kOp>
__global__ void reduce_combine_warps(Split p) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t o = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; o < p.plan.outputs;
       o += warps) {
    const Reduced<double> acc = warp_combine<kOp>(combine_strided<kOp>(p, o, lane, 32));
    if (lane == 0) write_output<kOp>(p, o, acc);
  }
}

// A block per output: the warps' results combined in warp order by warp 0.
template <ReduceOp kOp>
__global__ void reduce_combine_blocks(Split p) {
  __shared__ double values[kWarpsPerBlock];
  __shared__ long long index_of[kWarpsPerBlock];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  for (int64_t o = blockIdx.x; o < p.plan.outputs; o += gridDim.x) {
    Reduced<double> acc =
        warp_combine<kOp>(combine_strided<kOp>(p, o, int(threadIdx.x), kReduceThreads));
    if (lane == 0) {
      values[warp] = acc.value;
      index_of[warp] = acc.index;
    }
    __syncthreads();
    if (warp == 0) {
      acc = lane < kWarpsPerBlock ? Reduced<double>{values[lane], index_of[lane]}
                                  : detail::reduce_identity<double>(kOp);
      acc = warp_combine<kOp>(acc);
      if (lane == 0) write_output<kOp>(p, o, acc);
    }
    __syncthreads();  // the arrays are reused by the next output
  }
}

// Partials per output from which a block, not a warp, combines them.
constexpr int64_t kBlockCombineFrom = 512;

int grid_of(int64_t units, int64_t per_block) {
  return int(blocks_for(units, int(per_block), kMaxBlocks));
}

// How split cuts a plan: which kernel, S chunks of `chunk` elements per output, and whether the
// lanes-along-r kernel may read float4. A function of the sizes (and x's alignment) only.
struct SplitShape {
  bool lanes_along_r = false;
  bool vectors = false;
  int64_t chunk = 0;
  int64_t S = 1;
};

SplitShape reduce_split_shape(const ReducePlan& plan, const float* x) {
  SplitShape shape;
  const IndexMap& r = plan.reduced;
  const int64_t count = plan.reduced_count, inner = r.shape[r.ndim - 1];
  shape.lanes_along_r = r.stride[r.ndim - 1] == 1 && inner >= 32;
  if (shape.lanes_along_r) {
    const int64_t per_unit = (plan.outputs * count + kTargetUnits - 1) / kTargetUnits;
    const int64_t chunk = (per_unit + kWarpChunk - 1) / kWarpChunk * kWarpChunk;
    shape.chunk = chunk > kWarpChunk ? chunk : kWarpChunk;
    shape.S = (count + shape.chunk - 1) / shape.chunk;
    if (shape.S <= 1) shape.chunk = count;
    shape.vectors = r.ndim == 1 && count % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
  } else {
    const int64_t by_work = (count + kThreadChunk - 1) / kThreadChunk;
    const int64_t by_threads = (kTargetThreads + plan.outputs - 1) / plan.outputs;
    shape.S = by_work < by_threads ? by_work : by_threads;
    if (shape.S < 1) shape.S = 1;
    shape.chunk = (count + shape.S - 1) / shape.S;
  }
  if (shape.S < 1) shape.S = 1;
  return shape;
}

template <ReduceOp kOp>
void launch_split(const Split& p, const SplitShape& shape, const float* x, gpu::Stream stream) {
  const int64_t units = p.plan.outputs * p.S;
  if (shape.lanes_along_r) {
    reduce_lanes_along_r<kOp>
        <<<grid_of(units, kWarpsPerBlock), kReduceThreads, 0, stream>>>(p, x, shape.vectors);
  } else {
    reduce_lanes_along_o<kOp><<<grid_of(units, kReduceThreads), kReduceThreads, 0, stream>>>(p, x);
  }
  gpu::check_launch("reduce_tensor (split)");
  if (p.S >= kBlockCombineFrom) {
    reduce_combine_blocks<kOp><<<grid_of(p.plan.outputs, 1), kReduceThreads, 0, stream>>>(p);
    gpu::check_launch("reduce_tensor (split, combine)");
  } else if (p.S > 1) {
    reduce_combine_warps<kOp>
        <<<grid_of(p.plan.outputs, kWarpsPerBlock), kReduceThreads, 0, stream>>>(p);
    gpu::check_launch("reduce_tensor (split, combine)");
  }
}

}  // namespace

size_t reduce_tensor_workspace_bytes(const ReducePlan& plan, ReduceTensorVersion version) {
  if (version == ReduceTensorVersion::block_per_output || plan.outputs == 0) return 0;
  const SplitShape shape = reduce_split_shape(plan, nullptr);
  return shape.S > 1 ? size_t(plan.outputs * shape.S) * sizeof(Reduced<double>) : 0;
}

void reduce_tensor(ReduceOp op, const ReducePlan& plan, float alpha, const float* x, float beta,
                   float* y, float* indices, void* workspace, ReduceTensorVersion version,
                   gpu::Stream stream) {
  if (plan.outputs == 0) return;
  if (version == ReduceTensorVersion::block_per_output) {
    const int blocks = int(plan.outputs < kMaxBlocks ? plan.outputs : kMaxBlocks);
    reduce_block_per_output<<<blocks, kReduceThreads, 0, stream>>>(op, plan, alpha, x, beta, y,
                                                                   indices);
    gpu::check_launch("reduce_tensor");
    return;
  }
  const SplitShape shape = reduce_split_shape(plan, x);
  CREMA_CHECK(shape.S == 1 || workspace != nullptr, "reduce_tensor: split needs its workspace");
  const Split p{plan, shape.chunk, shape.S, alpha,
                beta, y,           indices, static_cast<Reduced<double>*>(workspace)};
  switch (op) {
    case ReduceOp::sum:
      return launch_split<ReduceOp::sum>(p, shape, x, stream);
    case ReduceOp::mul:
      return launch_split<ReduceOp::mul>(p, shape, x, stream);
    case ReduceOp::max:
      return launch_split<ReduceOp::max>(p, shape, x, stream);
    case ReduceOp::min:
      return launch_split<ReduceOp::min>(p, shape, x, stream);
    case ReduceOp::amax:
      return launch_split<ReduceOp::amax>(p, shape, x, stream);
    case ReduceOp::avg:
      return launch_split<ReduceOp::avg>(p, shape, x, stream);
    case ReduceOp::norm1:
      return launch_split<ReduceOp::norm1>(p, shape, x, stream);
    case ReduceOp::norm2:
      return launch_split<ReduceOp::norm2>(p, shape, x, stream);
    case ReduceOp::mul_no_zeros:
      return launch_split<ReduceOp::mul_no_zeros>(p, shape, x, stream);
  }
}

}  // namespace crema::kernels::cuda
