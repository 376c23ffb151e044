// Deconvolution (transposed convolution): the adjoint of Convolution in its input, which makes
// it an upsampling: every input pixel spreads its filter-weighted copy over the output.
//
//   y[n, g*K/G + k, h, w] = b[.] + sum over c of group g, (r, s) and (p, q) with
//                           p*stride_h - pad_h + r*dilation_h = h, q*stride_w - pad_w +
//                           s*dilation_w = w of w[c, k, r, s] * x[n, c, p, q]
//   x [N,C,H,W] -> y [N,K,P,Q], w [C, K/G, R, S] (PyTorch's ConvTranspose2d layout), b [K];
//   P = (H-1)*stride_h - 2*pad_h + dilation_h*(R-1) + 1 + output_padding_h, likewise Q.
//
// The convolution with the same keys maps y's shape back to x's: Deconvolution's forward is that
// convolution's backward data pass, its backward data the convolution's forward, and its weight
// gradient the convolution's filter gradient with x and dy swapping roles
// (kernels/convolution/convolution.h, conv_transpose2d_*).
//
// YAML keys (defaults): Convolution's, 2-D only (num_output = K, kernel_size, stride, pad,
// dilation, group,
//   and the weight and bias keys; weighted_layer.h), plus PyTorch's output_padding (0; n or
//   [h, w], less than the stride): the extra rows and columns at the bottom and right that pick
//   one of the `stride` output sizes which all convolve back to H x W; algorithm (auto; the
//   CUDA algorithm of each pass, and workspace_limit: layers/conv_algorithms.h); and math (the
//   net's model.math; fp32, tf32 or bf16, as Convolution's).
// Caffe's Deconvolution layer; Zeiler et al. 2010, Long et al. 2015 (FCN upsampling).
#include <array>
#include <tuple>

#include "kernels/convolution/convolution.h"
#include "layers/convolution_base.h"
#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

// y = T x + b with T the transpose of the convolution C (T = C^T), so dL/dx = C dy: the
// convolution of dy. For the weights, <dy, T_w x> = <C_w dy, x> is the convolution's loss with
// input dy and output gradient x, so dL/dw is the convolution's filter gradient of (dy, x).
// dL/db[k] += sum_{n,h,w} dy[n,k,h,w].
// (2-D only: each pass runs the transposed convolution of g.as_2d().)
void forward(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& x, const Tensor& w,
             const Tensor* b, Tensor& y, const kernels::ConvRequest& request) {
  kernels::conv_transpose2d_forward(ctx, g.as_2d(), x, w, b, y, request);
}
void backward_weights(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& x,
                      const Tensor& dy, Tensor* dw, Tensor* db,
                      const kernels::ConvRequest& request) {
  kernels::conv_transpose2d_backward_weights(ctx, g.as_2d(), x, dy, dw, db, request);
}
void backward_data(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& dy,
                   const Tensor& w, Tensor& dx, const kernels::ConvRequest& request) {
  kernels::conv_transpose2d_backward_data(ctx, g.as_2d(), dy, w, dx, request);
}
constexpr ConvPasses kPasses{forward, backward_weights, backward_data};

// What the 2-D sizes are checked against in messages.
constexpr const char* kTwoD = "a Deconvolution (2-D only)";

class DeconvolutionLayer final : public ConvolutionBase {
 public:
  explicit DeconvolutionLayer(const LayerSpec& spec) : ConvolutionBase(spec, true, kPasses) {
    kernel_ = keys_.kernel.for_rank(spec, 2, kTwoD);
    stride_ = keys_.stride.for_rank(spec, 2, kTwoD);
    pad_ = keys_.pad.for_rank(spec, 2, kTwoD);
    dilation_ = keys_.dilation.for_rank(spec, 2, kTwoD);
    std::tie(output_padding_h_, output_padding_w_) =
        read_spatial(spec, "output_padding", "", std::pair<int64_t, int64_t>{0, 0}, 0);
    if (output_padding_h_ >= stride_[0] || output_padding_w_ >= stride_[1]) {
      fail_at_key(spec, "output_padding",
                  "must be smaller than the stride " + std::to_string(stride_[0]) + "x" +
                      std::to_string(stride_[1]) + ", got " + std::to_string(output_padding_h_) +
                      "x" + std::to_string(output_padding_w_));
    }
  }

  // Each input element is multiplied into K/G * R * S outputs.
  int64_t multiply_adds(const std::vector<Blob*>& bottom,
                        const std::vector<Blob*>& top) const override {
    if (params_.empty() || bottom.empty()) return 0;
    const Tensor& w = params_[0].value;
    return bottom[0]->value.numel() * (w.numel() / w.dim(0));
  }

 protected:
  std::vector<int64_t> onnx_output_padding() const override {
    return {output_padding_h_, output_padding_w_};
  }

 private:
  // The convolution that maps y [N, K, P, Q] back to x [N, C, H, W] (its P() and Q() are H and W,
  // since output_padding < stride).
  kernels::ConvNdGeometry geometry(const Tensor& x) const override {
    const int64_t P = (x.dim(2) - 1) * stride_[0] - 2 * pad_[0] + dilation_[0] * (kernel_[0] - 1) +
                      1 + output_padding_h_;
    const int64_t Q = (x.dim(3) - 1) * stride_[1] - 2 * pad_[1] + dilation_[1] * (kernel_[1] - 1) +
                      1 + output_padding_w_;
    if (P < 1 || Q < 1) {
      fail_at_key(spec_, "pad",
                  "the output of a " + std::to_string(x.dim(2)) + "x" + std::to_string(x.dim(3)) +
                      " input would be " + std::to_string(P) + "x" + std::to_string(Q) +
                      "; use less padding");
    }
    return keys_.geometry(spec_, {x.dim(0), keys_.num_output, P, Q}, x.dim(1));
  }

  Shape weight_shape(const Tensor& x) const override {
    return {x.dim(1), keys_.num_output / keys_.group, kernel_[0], kernel_[1]};
  }
  int64_t expected_channels() override { return weight().value.dim(0); }
  Shape top_shape(const kernels::ConvNdGeometry& g) const override { return g.x_shape(); }

  std::array<int64_t, 3> kernel_{}, stride_{}, pad_{}, dilation_{};  // [h, w] of the keys
  int64_t output_padding_h_ = 0, output_padding_w_ = 0;
};

}  // namespace

void register_deconvolution(LayerRegistry& registry) {
  registry.add<DeconvolutionLayer>("Deconvolution");
}

}  // namespace crema
