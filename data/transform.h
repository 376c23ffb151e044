// Per-sample transforms, applied in order by the loader's worker as it assembles a batch.
//
//   scale  x <- x * a                 one value; Caffe's MNIST uses 0.00390625 = 1/256
//   mean   x[c,...] <- x[c,...] - m   one value, or one per channel (the sample's first axis)
//   std    x[c,...] <- x[c,...] / s   one value, or one per channel; every s must be positive
//
// The usual normalization (x/255 - mean) / std is the list [scale 1/255, mean m, std s].
// A transform is immutable once made, so one object serves every worker thread.
//
// Parsing stays out of data/: the config layer turns YAML into TransformSpec values and calls
// make_transform. To add a kind: subclass Transform in transform.cpp, add it to make_transform
// and to the known-kinds list, and describe it above.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/shape.h"

namespace crema::data {

// A transform as a config describes it: {kind: "mean", values: [0.2860]}.
struct TransformSpec {
  std::string kind;
  std::vector<float> values;
};

class Transform {
 public:
  virtual ~Transform() = default;
  // Throws crema::Error when the transform cannot apply to samples of `sample_shape` (a
  // per-channel list whose length is not the channel count). The loader calls it once.
  virtual void check(const Shape& sample_shape) const {}
  // Transforms one sample, shape_numel(sample_shape) floats, in place.
  virtual void apply(float* sample, const Shape& sample_shape) const = 0;
  // "scale(0.00390625)", "mean(0.5, 0.4, 0.3)", for logs.
  virtual std::string description() const = 0;
};

// The kinds make_transform knows, in the order the header lists them.
const std::vector<std::string>& transform_kinds();

// Builds the transform `spec` describes. Throws crema::Error for an unknown kind (listing the
// known ones), a wrong number of values, or a non-positive std.
std::unique_ptr<Transform> make_transform(const TransformSpec& spec);

}  // namespace crema::data
