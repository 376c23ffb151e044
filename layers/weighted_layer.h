// WeightedLayer: the base of layers with a weight and an optional bias (Convolution,
// Deconvolution, InnerProduct), which read the same keys and create their parameters the same way.
//
// YAML keys (defaults): bias_term (true), weight_filler ({type: xavier}),
//   bias_filler ({type: constant, value: 0}), param: {weight: {...}, bias: {...}}.
// A parameter with lr_mult 0 is frozen: the solver never updates it, so backward does not
// compute its gradient (weight_grad() and bias_grad() return null for it).
//
// Also here, because Convolution and Deconvolution share them (and Pooling the spatial sizes):
// the readers of Caffe's ConvolutionParameter keys.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/layer.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/geometry_nd.h"
#include "layers/filler.h"

namespace crema {

class WeightedLayer : public Layer {
 protected:
  explicit WeightedLayer(const LayerSpec& spec);

  // Creates params_[0] "<name>.weight" of `weight_shape` and, with bias_term, params_[1]
  // "<name>.bias" of `num_outputs`, filled by their fillers.
  void create_weight_and_bias(const Shape& weight_shape, int64_t num_outputs, Context& ctx);

  Param& weight() { return params_[0]; }
  Param& bias() { return params_[1]; }  // only with bias_term

  // The gradients backward must add to: null for a frozen parameter (lr_mult 0) or no bias.
  Tensor* weight_grad();
  Tensor* bias_grad();

  bool bias_term_ = true;
  FillerSpec weight_filler_, bias_filler_;
};

// A spatial size {h, w} given as `key: n`, as `key: [h, w]`, or -- when `prefix` is not empty --
// as Caffe's separate `<prefix>_h` and `<prefix>_w` (kernel_size or kernel_h and kernel_w).
// `fallback` when none is given (nullopt: the key is required). A value below `minimum`, both
// forms at once, or only one of the _h/_w pair is an error naming the layer and the key.
std::pair<int64_t, int64_t> read_spatial(const LayerSpec& spec, const std::string& key,
                                         const std::string& prefix,
                                         std::optional<std::pair<int64_t, int64_t>> fallback,
                                         int64_t minimum);

// A spatial size as a key gives it for 1 to 3 spatial axes: one value for every axis (`key: n`),
// one per axis outermost first (`key: [3, 5]`, `key: [3, 3, 3]`), or Caffe's `<prefix>_h` and
// `<prefix>_w` (two axes).
struct SpatialSize {
  std::string key;              // the key it was read from, for the messages
  std::vector<int64_t> values;  // one per axis; a single one when every_axis
  bool every_axis = true;
  // The sizes for `rank` spatial axes (entries past rank unused). A list of another length fails
  // naming the layer and the key: "3 entries for the 1 spatial axis of <what>".
  std::array<int64_t, 3> for_rank(const LayerSpec& spec, int rank, const std::string& what) const;
};
// Reads `key` (or `<prefix>_h` + `<prefix>_w` when prefix is not empty); `fallback` for every
// axis when absent (nullopt: required). Values below `minimum`, lists of more than 3, both forms
// at once or half a pair are errors naming the layer and the key.
SpatialSize read_spatial_size(const LayerSpec& spec, const std::string& key,
                              const std::string& prefix, std::optional<int64_t> fallback,
                              int64_t minimum);

// The keys of Caffe's ConvolutionParameter, as Convolution and Deconvolution read them
// (defaults): num_output (required), kernel_size or kernel_h + kernel_w (required), stride or
// stride_h + stride_w (1), pad or pad_h + pad_w (0), dilation (1), group (1); each size n (every
// spatial axis) or a list of one per spatial axis. Out-of-range values are errors naming the
// layer and the key.
struct ConvolutionKeys {
  int64_t num_output;
  SpatialSize kernel, stride, pad, dilation;
  int64_t group;

  explicit ConvolutionKeys(const LayerSpec& spec);
  // Fails naming `group` unless it divides both channel counts.
  void check_groups(const LayerSpec& spec, int64_t input_channels, int64_t output_channels) const;
  // The convolution of an input of shape `input` [N, C, spatial...] (1 to 3 spatial axes) with K
  // filters and these sizes; a size list whose length is not the input's spatial rank fails
  // naming the layer, the key and the input's shape.
  kernels::ConvNdGeometry geometry(const LayerSpec& spec, const Shape& input, int64_t K) const;
};

}  // namespace crema
