// conv_sample: crema's convolution primitive called as a library, the way cuDNN's conv_sample
// calls cuDNN. Builds a 2 x 3 x 9 x 11 input and a 4 x 3 x 3 x 3 filter from a formula, runs the
// forward pass with pad 1 and stride 2 through the primitive API (kernels/api/primitives.h:
// tensor descriptors, alpha and beta, as cuDNN's cudnnConvolutionForward then cudnnAddTensor for
// the bias) on the CPU (and on GPU 0 when this crema has its CUDA backend and a GPU is present),
// and checks every output against the definition's six loops, here in double:
//
//   y[n,k,p,q] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, c, p*2 - 1 + r, q*2 - 1 + s]
//
// Prints the output shape, a checksum and the largest error per device; exits 1 if an error
// exceeds 1e-5 (relative to the output's scale).
//
//   conv_sample
//
// Built in the tree as crema_example_conv and, against an installed crema, by tests/package.
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/api/primitives.h"
#include "kernels/convolution/geometry.h"

namespace {

using crema::Context;
using crema::Device;
using crema::Tensor;
using crema::kernels::Conv2dGeometry;
namespace api = crema::kernels::api;

// Values that differ in every index and sign, exact in float.
std::vector<float> pattern(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = float((i * 37 + seed * 11) % 23 - 11) / 8.0f;
  return v;
}

std::vector<double> direct(const Conv2dGeometry& g, const std::vector<float>& x,
                           const std::vector<float>& w, const std::vector<float>& b) {
  const int64_t P = g.P(), Q = g.Q();
  std::vector<double> y(size_t(g.N * g.K * P * Q));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          double sum = b[size_t(k)];
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t r = 0; r < g.R; ++r)
              for (int64_t s = 0; s < g.S; ++s) {
                const int64_t i = p * g.stride_h - g.pad_h + r, j = q * g.stride_w - g.pad_w + s;
                if (i < 0 || i >= g.H || j < 0 || j >= g.W) continue;
                sum += double(w[size_t(((k * g.C + c) * g.R + r) * g.S + s)]) *
                       x[size_t(((n * g.C + c) * g.H + i) * g.W + j)];
              }
          y[size_t(((n * g.K + k) * P + p) * Q + q)] = sum;
        }
  return y;
}

// Runs the primitive on `device` and returns the largest error against `expected`.
double run_on(const Device& device, const Conv2dGeometry& g, const std::vector<float>& x,
              const std::vector<float>& w, const std::vector<float>& b,
              const std::vector<double>& expected) {
  Context ctx(device);
  const Tensor host_x = Tensor::from_vector(g.x_shape(), x);
  const Tensor host_w = Tensor::from_vector(g.w_shape(), w);
  const Tensor host_b = Tensor::from_vector({1, g.K, 1, 1}, b);
  Tensor dx = ctx.empty(g.x_shape()), dw = ctx.empty(g.w_shape()), db = ctx.empty({1, g.K, 1, 1});
  ctx.copy(dx, host_x);
  ctx.copy(dw, host_w);
  ctx.copy(db, host_b);
  Tensor y = ctx.empty(g.y_shape());
  // Descriptors over the tensors' memory (any strides would do; these are packed NCHW).
  const api::TensorDesc xd = api::TensorDesc::of(dx), wd = api::TensorDesc::of(dw),
                        bd = api::TensorDesc::of(db), yd = api::TensorDesc::of(y);
  api::ConvDesc conv;
  conv.pad_h = g.pad_h;
  conv.pad_w = g.pad_w;
  conv.stride_h = g.stride_h;
  conv.stride_w = g.stride_w;
  api::convolution_forward(ctx, conv, 1.0, xd, wd, 0.0, yd);  // y = 1 * conv(x, w) + 0 * y
  api::add_tensor(ctx, 1.0, bd, 1.0, yd);                     // y = 1 * b + 1 * y, b broadcast
  ctx.synchronize();
  const std::vector<float> out = y.to_vector();
  double checksum = 0, error = 0, scale = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    checksum += out[i];
    error = std::max(error, std::fabs(out[i] - expected[i]));
    scale = std::max(scale, std::fabs(expected[i]));
  }
  std::printf("%-7s y [%lld, %lld, %lld, %lld]  checksum %.6f  max error %.2e\n",
              device.str().c_str(), (long long)g.N, (long long)g.K, (long long)g.P(),
              (long long)g.Q(), checksum, error);
  return error / std::max(scale, 1.0);
}

}  // namespace

int main() {
  try {
    Conv2dGeometry g{2, 3, 9, 11, 4, 3, 3};
    g.pad_h = g.pad_w = 1;
    g.stride_h = g.stride_w = 2;
    g.validate("conv_sample");
    const std::vector<float> x = pattern(2 * 3 * 9 * 11, 1), w = pattern(4 * 3 * 3 * 3, 2),
                             b = pattern(4, 3);
    const std::vector<double> expected = direct(g, x, w, b);
    double worst = run_on(Device::cpu(), g, x, w, b, expected);
    if (crema::gpu::device_count() > 0) {
      worst = std::max(worst, run_on(Device::cuda(0), g, x, w, b, expected));
    }
    std::printf("%s\n", worst <= 1e-5 ? "ok" : "MISMATCH");
    return worst <= 1e-5 ? 0 : 1;
  } catch (const crema::Error& e) {
    std::fprintf(stderr, "conv_sample: %s\n", e.what());
    return 2;
  }
}
