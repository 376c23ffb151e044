// What Convolution and Deconvolution share: their keys (ConvolutionKeys), their algorithm
// requests (ConvAlgorithms), and setup and reshape, which differ only in the shapes each layer
// names (its weights, the channels they expect of x, its output) and in the geometry of the
// convolution it runs (Deconvolution's maps its output back to its input).
#pragma once

#include <string>
#include <vector>

#include "kernels/convolution/convolution.h"
#include "layers/conv_algorithms.h"
#include "layers/weighted_layer.h"

namespace crema {

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
    const kernels::Conv2dGeometry g = geometry(x);
    algorithms_.check(spec_, g);
    top[0]->value.reshape(top_shape(g));
  }

  std::string describe_algorithm() const override { return algorithms_.describe(); }

 protected:
  ConvolutionBase(const LayerSpec& spec, bool transposed)
      : WeightedLayer(spec), keys_(spec), algorithms_(spec, transposed) {}

  // The geometry of the convolution the layer runs for input x.
  virtual kernels::Conv2dGeometry geometry(const Tensor& x) const = 0;
  // The weights' shape for input x (setup), and the input channels they expect (reshape).
  virtual Shape weight_shape(const Tensor& x) const = 0;
  virtual int64_t expected_channels() = 0;
  // The output's shape.
  virtual Shape top_shape(const kernels::Conv2dGeometry& g) const = 0;

  ConvolutionKeys keys_;
  ConvAlgorithms algorithms_;

 private:
  const Tensor& input(const std::vector<Blob*>& bottom) const {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() != 4) fail("expects a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
    return x;
  }
};

}  // namespace crema
