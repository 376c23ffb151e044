// What Convolution and Deconvolution share: their keys (ConvolutionKeys), their algorithm
// requests (ConvAlgorithms), and setup, reshape, forward and backward, which differ only in the
// shapes each layer names (its weights, the channels they expect of x, its output), in the
// geometry of the convolution it runs (Deconvolution's maps its output back to its input) and in
// the three Tensor-level calls that run its passes (ConvPasses). Convolution takes 1 to 3 spatial
// axes ([N, C, L], [N, C, H, W], [N, C, D, H, W]); Deconvolution 2.
#pragma once

#include <string>
#include <vector>

#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"
#include "layers/conv_algorithms.h"
#include "layers/weighted_layer.h"

namespace crema {

// The Tensor-level calls of a layer's three passes (kernels/convolution/convolution_nd.h,
// convolution.h): y from x, the parameter gradients dw and db (each null when frozen or absent:
// not computed), and dx.
struct ConvPasses {
  void (*forward)(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& x, const Tensor& w,
                  const Tensor* b, Tensor& y, const kernels::ConvRequest& request);
  void (*backward_weights)(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& x,
                           const Tensor& dy, Tensor* dw, Tensor* db,
                           const kernels::ConvRequest& request);
  void (*backward_data)(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& dy,
                        const Tensor& w, Tensor& dx, const kernels::ConvRequest& request);
};

class ConvolutionBase : public WeightedLayer {
 public:
  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    const Tensor& x = input(bottom);
    keys_.check_groups(spec_, x.dim(1), keys_.num_output);
    algorithms_.check(spec_, geometry(x));
    create_weight_and_bias(weight_shape(x), keys_.num_output, ctx);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Tensor& x = input(bottom);
    if (x.dim(1) != expected_channels()) {
      fail("input has " + std::to_string(x.dim(1)) + " channels, the weights expect " +
           std::to_string(expected_channels()));
    }
    const kernels::ConvNdGeometry g = geometry(x);
    algorithms_.check(spec_, g);
    top[0]->value.reshape(top_shape(g));
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor* b = bias_term_ ? &bias().value : nullptr;
    passes_.forward(ctx, geometry(bottom[0]->value), bottom[0]->value, weight().value, b,
                    top[0]->value, algorithms_.request(ConvAlgorithms::forward));
  }

  // Frozen parameters (lr_mult 0) get no gradient; dx only where the input wants one.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const kernels::ConvNdGeometry g = geometry(bottom[0]->value);
    const Tensor& dy = top[0]->grad;
    Tensor* dw = weight_grad();
    Tensor* db = bias_grad();
    if (dw != nullptr || db != nullptr) {
      passes_.backward_weights(ctx, g, bottom[0]->value, dy, dw, db,
                               algorithms_.request(ConvAlgorithms::backward_filter));
    }
    if (propagate_down[0]) {
      passes_.backward_data(ctx, g, dy, weight().value, bottom[0]->grad,
                            algorithms_.request(ConvAlgorithms::backward_data));
    }
  }

  // dL/dw reads x; dL/dx reads only dL/dy and the weights.
  BackwardReads backward_reads() const override { return {true, false}; }

  std::string describe_algorithm() const override { return algorithms_.describe(); }

  // ONNX's Conv (ConvTranspose for Deconvolution) with the same weights, padding on both sides;
  // N-d as ONNX's Conv is (one entry per spatial axis of the weights [K, C/G, spatial...]).
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    std::vector<std::string> inputs{io.bottom(0), g.weight(params_[0].name, params_[0].value)};
    if (bias_term_) inputs.push_back(g.weight(params_[1].name, params_[1].value));
    const int rank = params_[0].value.ndim() - 2;
    const std::string what = "the weights " + shape_str(params_[0].value.shape());
    auto per_axis = [&](const SpatialSize& size) {
      const std::array<int64_t, 3> v = size.for_rank(spec_, rank, what);
      return std::vector<int64_t>(v.begin(), v.begin() + rank);
    };
    std::vector<int64_t> pads = per_axis(keys_.pad);
    pads.insert(pads.end(), pads.begin(), pads.end());  // begins, then the same ends
    std::vector<GraphAttribute> attributes{{"kernel_shape", per_axis(keys_.kernel)},
                                           {"strides", per_axis(keys_.stride)},
                                           {"pads", pads},
                                           {"dilations", per_axis(keys_.dilation)},
                                           {"group", keys_.group}};
    const std::vector<int64_t> output_padding = onnx_output_padding();
    if (!output_padding.empty()) attributes.emplace_back("output_padding", output_padding);
    g.node(output_padding.empty() ? "Conv" : "ConvTranspose", inputs, {io.top(0)}, attributes);
  }

 protected:
  ConvolutionBase(const LayerSpec& spec, bool transposed, const ConvPasses& passes)
      : WeightedLayer(spec),
        keys_(spec),
        algorithms_(spec, transposed),
        passes_(passes),
        transposed_(transposed) {}

  // The geometry of the convolution the layer runs for input x.
  virtual kernels::ConvNdGeometry geometry(const Tensor& x) const = 0;
  // The weights' shape for input x (setup), and the input channels they expect (reshape).
  virtual Shape weight_shape(const Tensor& x) const = 0;
  virtual int64_t expected_channels() = 0;
  // The output's shape.
  virtual Shape top_shape(const kernels::ConvNdGeometry& g) const = 0;
  // The exported form: Convolution none (ONNX's Conv), Deconvolution its output_padding [h, w]
  // (ConvTranspose).
  virtual std::vector<int64_t> onnx_output_padding() const { return {}; }

  ConvolutionKeys keys_;
  ConvAlgorithms algorithms_;

 private:
  ConvPasses passes_;
  bool transposed_;

  const Tensor& input(const std::vector<Blob*>& bottom) const {
    const Tensor& x = bottom[0]->value;
    if (transposed_ && x.ndim() != 4) {
      fail("expects a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
    }
    if (x.ndim() < 3 || x.ndim() > 5) {
      fail("expects a 3-D [N, C, L], 4-D [N, C, H, W] or 5-D [N, C, D, H, W] input, got " +
           shape_str(x.shape()));
    }
    return x;
  }
};

}  // namespace crema
