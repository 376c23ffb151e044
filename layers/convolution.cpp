// Convolution: y = w * x + b, Caffe's (and cuDNN's) cross-correlation, over 1, 2 or 3 spatial
// axes (PyTorch's Conv1d, Conv2d, Conv3d).
//
//   y[n,k,p,q] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, g*C/G + c, p*stride_h - pad_h + r*dilation_h,
//                                                             q*stride_w - pad_w + s*dilation_w]
//   x [N,C,H,W] -> y [N,K,P,Q], w [K, C/G, R, S], b [K]; G = group, g = the group of k;
//   P = (H + 2*pad_h - dilation_h*(R-1) - 1) / stride_h + 1, likewise Q.
// The same with one index per spatial axis for x [N,C,L] -> y [N,K,P], w [K, C/G, S] (1-D) and
// x [N,C,D,H,W] -> y [N,K,O,P,Q], w [K, C/G, T, R, S] (3-D): kernels/convolution/convolution_nd.h.
//
// YAML keys (defaults): num_output (required), kernel_size (required; n for every spatial axis,
//   or one per axis: [S] (1-D), [R, S] (2-D), [T, R, S] (3-D); or Caffe's kernel_h + kernel_w),
//   stride (1; or stride_h + stride_w), pad (0; or pad_h + pad_w), dilation (1) -- each n or one
//   per spatial axis, a list of another length being an error naming the layer and the key --,
//   group (1; C and K must be multiples: group = C = K is a
//   depthwise convolution), and the weight and bias keys of WeightedLayer (weighted_layer.h):
//   bias_term, weight_filler, bias_filler, param (lr_mult 0 freezes a parameter: no gradient),
//   algorithm (auto; or find, or an algorithm's name, for all passes or per pass:
//   layers/conv_algorithms.h; a 3-D convolution takes auto or find, which choose the 2-D
//   algorithm its depth_col pass runs on the GPU),
//   workspace_limit (the net's model.workspace_limit), and math (the
//   net's model.math, itself fp32 by default; or tf32 or bf16: tensor-core products with fp32
//   accumulation on a GPU where the pass's version has them, fp32 on the CPU and in 3-D's
//   vol2col fallback).
// Dtypes and layouts (runs(); the Net's precision pass hands the layer what it runs): f32 in
// nchw or nhwc on the CPU and on CUDA, f64 in both on the CPU (the references, for gradient
// checks), bf16 and f16 in nhwc on CUDA (tensor cores, fp32 sums). A 4-D nhwc or a 16-bit input
// is convolved with a compute copy of the f32 KCRS master weight (convolution_base.h); nhwc
// applies to 2-D convolutions (1-D and 3-D inputs have one order).
// From LeCun et al. 1998 (LeNet); the layout and keys are Caffe's. The kernels pick a path per
// geometry (1x1 filters with stride 1 and no padding are plain GEMMs; depthwise convolutions run
// direct loops on the GPU; 1-D runs the 2-D paths with H = 1; 3-D on the GPU folds the depth taps
// into channels and runs one 2-D convolution per chunk of images, on the CPU vol2col + GEMM):
// kernels/convolution/README.md.
#include <algorithm>
#include <optional>

#include "kernels/convolution/convolution_nd.h"
#include "layers/convolution_base.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

// dL/db[k] += sum of dy[n,k,...] over n and the output positions; dL/dw += correlation of x with
// dy (either may be null: frozen). dL/dx = the transposed convolution of dy with w: each input
// element gathers every output it fed.
constexpr ConvPasses kPasses{kernels::conv_nd_forward, kernels::conv_nd_backward_weights,
                             kernels::conv_nd_backward_data};

class ConvolutionLayer final : public ConvolutionBase {
 public:
  explicit ConvolutionLayer(const LayerSpec& spec) : ConvolutionBase(spec, false, kPasses) {}

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    ConvolutionBase::reshape(bottom, top, ctx);
    const Tensor& x = bottom[0]->value;
    shaped_nd_ = {geometry(x), x.dtype(), x.layout(), x.ndim(), ctx.num_threads()};
  }

  // The passes as kernels::conv_nd_workspace_bytes counts them for 1-D and 3-D convolutions (on a
  // GPU, 3-D's depth_col takes its chunk's scratch and its 2-D record's); 2-D: ConvolutionBase's.
  int64_t workspace_bytes(const Device& device, bool backward, bool bottom_grad) const override {
    if (!shaped_nd_ || shaped_nd_->g.rank == 2) {
      return ConvolutionBase::workspace_bytes(device, backward, bottom_grad);
    }
    const auto pass_bytes = [&](ConvAlgorithms::Pass pass, bool with_bias) {
      return int64_t(kernels::conv_nd_workspace_bytes(
          device, algorithms_.pass_of(pass), shaped_nd_->g, shaped_nd_->dtype, Layout::nchw,
          algorithms_.planned_request(pass), with_bias, shaped_nd_->threads));
    };
    int64_t most = pass_bytes(ConvAlgorithms::forward, false);
    if (backward && !params_[0].frozen()) {  // db alone takes no workspace
      most = std::max(
          most, pass_bytes(ConvAlgorithms::backward_filter, bias_term_ && !params_[1].frozen()));
    }
    if (backward && bottom_grad) {
      most = std::max(most, pass_bytes(ConvAlgorithms::backward_data, false));
    }
    return most;
  }

  // y as a window of a Concat's top (core/VIEWS.md): the CPU's f32 nchw 2-D path takes the
  // images' stride (kernels::conv2d_forward_window); the GPU's paths do not yet.
  bool writes_top_window(const Device& device, size_t k) const override {
    return k == 0 && shaped_nd_ && shaped_nd_->g.rank == 2 && shaped_nd_->x_ndim == 4 &&
           kernels::conv2d_window_supported(device, shaped_nd_->dtype, shaped_nd_->layout);
  }

  bool runs(DType dtype, Layout layout, const Device& device) const override {
    switch (dtype) {
      case DType::f32:
        return true;
      case DType::f64:
        return device.is_cpu();
      default:
        return device.is_cuda() && layout == Layout::nhwc;
    }
  }

 private:
  kernels::ConvNdGeometry geometry(const Tensor& x) const override {
    return keys_.geometry(spec_, x.shape(), keys_.num_output);
  }
  Shape weight_shape(const Tensor& x) const override { return geometry(x).w_shape(); }
  int64_t expected_channels() override { return weight().value.dim(1) * keys_.group; }
  Shape top_shape(const kernels::ConvNdGeometry& g) const override { return g.y_shape(); }

  // The last reshape's geometry and input, for workspace_bytes.
  struct ShapedNd {
    kernels::ConvNdGeometry g;
    DType dtype;
    Layout layout;
    int x_ndim;
    int threads;
  };
  std::optional<ShapedNd> shaped_nd_;
};

}  // namespace

void register_convolution(LayerRegistry& registry) {
  registry.add<ConvolutionLayer>("Convolution");
}

}  // namespace crema
