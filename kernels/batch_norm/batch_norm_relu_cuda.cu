// The fused batch norm + ReLU (+ residual) of batch_norm_relu.h on CUDA: the kernels of the
// version production runs for the shape (split_channel, or rows_tiled where S == 1) and the
// inference kernel (batch_norm_cuda.cuh) with the fused policies -- the forward stores
// y = relu((0 + z) + r) (and the copy of x), the backward reads the gradient at z as dy masked by
// the ReLU (by y, or by z recomputed from x with the forward's expression), or as the dr its
// pass 1 stored.
// The sums and the arithmetic around them are the plain kernels': the fused form gives the
// unfused chain's bits. The add and the select round as the Eltwise SUM (__fadd_rn from 0) and
// ReLU (x > 0 ? x : 0 * x) kernels do.
#include "core/error.h"
#include "kernels/batch_norm/batch_norm_relu.h"
#include "kernels/batch_norm/batch_norm_rows_tiled_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// y = relu((0 + z) + r) or relu(z), rounded as the Eltwise SUM and ReLU kernels round them; x
// copied first (y may alias x). fetch loads r, so that rows_tiled has it in flight with x.
template <class T>
struct StoreRelu {
  static constexpr int kLoads = 1;  // r
  const T* r;
  T* y;
  T* x_copy;
  template <int V>
  struct Inputs {
    Packed<T, V> r;
  };
  template <int V>
  __device__ Inputs<V> fetch(int64_t j) const {
    Inputs<V> in;
    if (r) in.r.load(r, j);
    return in;
  }
  template <int V>
  __device__ void vec(int64_t j, const float (&x)[V], const float (&z)[V],
                      const Inputs<V>& in) const {
    if (x_copy) store_floats<V>(x_copy, j, x);
    float rv[V], out[V];
    if (r) in.r.widen(rv);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float v = r ? __fadd_rn(__fadd_rn(0.0f, z[i]), rv[i]) : z[i];
      out[i] = v > 0.0f ? v : __fmul_rn(0.0f, v);
    }
    store_floats<V>(y, j, out);
  }
  template <int V>
  __device__ void vec(int64_t j, const float (&x)[V], const float (&z)[V]) const {
    vec<V>(j, x, z, fetch<V>(j));
  }
  __device__ void operator()(int64_t j, float x, float z) const {
    const float xs[1] = {x}, zs[1] = {z};
    vec<1>(j, xs, zs);
  }
  bool vectorizable() const {
    return aligned16(r) && aligned16(y) && aligned16(x_copy);
  }
};

// dv = dy where the ReLU's output y is positive (batch_norm_relu.h) or, without y, where its
// input z, recomputed from x, is (0 * dy elsewhere, as ReLU's backward); stored to dr when dr is
// given. channels<V>(c0) serves channels c0 .. c0 + V - 1; its fetch loads dy and y, and the
// step that computes stores dr, so rows_tiled issues every row's loads before a dr store.
template <class T>
struct ReluGrad {
  static constexpr int kLoads = 2;         // dy, y
  static constexpr bool kMayStore = true;  // dr
  const T *dy, *y;
  T* dr;
  const float *gamma, *beta, *mean, *invstd;
  template <int V>
  struct Channels {
    const T *dy, *y;
    T* dr;
    float mean[V], scale[V], shift[V];
    struct Inputs {
      Packed<T, V> dy, y;
    };
    __device__ Inputs fetch(int64_t j) const {
      Inputs in;
      in.dy.load(dy, j);
      if (y) in.y.load(y, j);
      return in;
    }
    __device__ void operator()(int64_t j, const float (&x)[V], const Inputs& in,
                               float (&g)[V]) const {
      float d[V], v[V];
      in.dy.widen(d);
      if (y) {
        in.y.widen(v);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = normalized(x[i], mean[i], scale[i], shift[i]);
      }
#pragma unroll
      for (int i = 0; i < V; ++i) g[i] = v[i] > 0.0f ? d[i] : __fmul_rn(0.0f, d[i]);
      if (dr) store_floats<V>(dr, j, g);
    }
    // The one-step form, the same expressions loading as it goes (not through fetch: ptxas gives
    // split_rows_vec's and rows_tiled's f32 unrolled loops fewer registers so).
    __device__ void operator()(int64_t j, const float (&x)[V], float (&g)[V]) const {
      float d[V], v[V];
      load_floats<V>(dy, j, d);
      if (y) {
        load_floats<V>(y, j, v);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = normalized(x[i], mean[i], scale[i], shift[i]);
      }
#pragma unroll
      for (int i = 0; i < V; ++i) g[i] = v[i] > 0.0f ? d[i] : __fmul_rn(0.0f, d[i]);
      if (dr) store_floats<V>(dr, j, g);
    }
    __device__ float operator()(int64_t j, float x) const {
      const float xs[1] = {x};
      float g[1];
      (*this)(j, xs, g);
      return g[0];
    }
  };
  template <int V>
  __device__ Channels<V> channels(int64_t c0) const {
    Channels<V> ch{dy, y, dr, {}, {}, {}};
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int64_t c = c0 + i;
      ch.mean[i] = mean[c];
      ch.scale[i] = (gamma ? gamma[c] : 1.0f) * invstd[c];
      ch.shift[i] = beta ? beta[c] : 0.0f;
    }
    return ch;
  }
  __device__ Channels<1> channel(int64_t c) const {
    return channels<1>(c);
  }
  bool vectorizable() const {
    return aligned16(dy) && aligned16(y) && aligned16(dr);
  }
};

// block_per_channel's kernels take no policies: the fused forms run the other versions.
void check_fused_version(const BatchNormShape& s, BatchNormVersion version) {
  CREMA_CHECK(version != BatchNormVersion::block_per_channel,
              "the fused batch norm + ReLU has no block_per_channel version");
  check_version_fits(s, version);
}

}  // namespace

template <class T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* x, const T* r,
                                      const float* gamma, const float* beta, float eps,
                                      float momentum, T* y, T* x_copy, float* save_mean,
                                      float* save_invstd, float* running_mean, float* running_var,
                                      float* num_batches_tracked, void* workspace,
                                      BatchNormVersion version, gpu::Stream stream) {
  if (s.C == 0) return;
  check_fused_version(s, version);
  const TrainingOutputs out{eps,          momentum,    save_mean,          save_invstd,
                            running_mean, running_var, num_batches_tracked};
  forward_training_version(version, s, x, gamma, beta, out, StoreRelu<T>{r, y, x_copy}, workspace,
                           stream, "batch_norm_relu_forward_training");
}

template <class T>
void batch_norm_relu_forward_inference(const BatchNormShape& s, const T* x, const T* r,
                                       const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var,
                                       float eps, T* y, T* x_copy, float* save_mean,
                                       float* save_invstd, gpu::Stream stream) {
  forward_inference_best(s, x, gamma, beta, running_mean, running_var, eps,
                         StoreRelu<T>{r, y, x_copy}, save_mean, save_invstd, stream,
                         "batch_norm_relu_forward_inference");
}

// Pass 1 stores dr (when wanted; it then runs even when no sum is needed) and pass 2 reads it
// back; without dr both passes apply the mask.
template <class T>
void batch_norm_relu_backward(const BatchNormShape& s, const T* x, const T* y, const T* dy,
                              const float* gamma, const float* beta, const float* save_mean,
                              const float* save_invstd, bool batch_stats, T* dx, T* dr,
                              float* dgamma, float* dbeta, void* workspace,
                              BatchNormVersion version, gpu::Stream stream) {
  if (s.C == 0) return;
  check_fused_version(s, version);
  const BackwardOutputs out{batch_stats, gamma, save_mean, save_invstd, dgamma, dbeta};
  const char* op = "batch_norm_relu_backward";
  const ReluGrad<T> mask{dy, y, dr, gamma, beta, save_mean, save_invstd};
  if (dr) {
    backward_version(version, s, x, out, true, mask, LoadGrad<T>{dr}, dx, workspace, stream, op);
  } else {
    backward_version(version, s, x, out, batch_stats || dgamma || dbeta, mask, mask, dx, workspace,
                     stream, op);
  }
}

#define CREMA_BATCH_NORM_RELU_INSTANTIATE(T)                                                       \
  template void batch_norm_relu_forward_training<T>(                                               \
      const BatchNormShape&, const T*, const T*, const float*, const float*, float, float, T*, T*, \
      float*, float*, float*, float*, float*, void*, BatchNormVersion, gpu::Stream);               \
  template void batch_norm_relu_forward_inference<T>(                                              \
      const BatchNormShape&, const T*, const T*, const float*, const float*, const float*,         \
      const float*, float, T*, T*, float*, float*, gpu::Stream);                                   \
  template void batch_norm_relu_backward<T>(const BatchNormShape&, const T*, const T*, const T*,   \
                                            const float*, const float*, const float*,              \
                                            const float*, bool, T*, T*, float*, float*, void*,     \
                                            BatchNormVersion, gpu::Stream);
CREMA_BATCH_NORM_RELU_INSTANTIATE(float)
CREMA_BATCH_NORM_RELU_INSTANTIATE(bf16_t)
CREMA_BATCH_NORM_RELU_INSTANTIATE(f16_t)
#undef CREMA_BATCH_NORM_RELU_INSTANTIATE

}  // namespace crema::kernels::cuda
