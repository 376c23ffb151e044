// Flatten and Reshape: the bottom under another shape, the same elements in the same order
// (Caffe's Flatten and Reshape, torch.flatten and torch.reshape).
//
//   Flatten:  x [A_0, ..., A_{d-1}] -> y [A_0, .., A_{a-1}, A_a * ... * A_e, A_{e+1}, ..]
//             for a = axis, e = end_axis: [N, C, H, W] -> [N, C*H*W] by default.
//             YAML keys (defaults): axis (1), end_axis (-1); negative counts from the end.
//   Reshape:  x [..] -> y [..] given by `shape` (Caffe's rules): 0 copies the bottom's extent at
//             that position, one -1 is inferred from the element count; `axis` and `num_axes`
//             restrict the reshaping to the bottom's axes [axis, axis + num_axes), the others
//             kept: {shape: [-1], axis: 1} flattens all but the first axis.
//             YAML keys (defaults): shape (required; a list, or Caffe's {dim: [..]}), axis (0;
//             -1 is the end, so shape is appended), num_axes (-1: all axes from axis).
//
// Both are views: the top's value shares the bottom's storage (no copy, forward does nothing)
// and in backward the bottom's gradient becomes a view of the top's. Not in place (the blob
// would change shape under its producer). As in Caffe, a layer running in place on the top
// writes into the bottom's storage too.
#include <string>

#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class ViewLayer : public Layer {
 public:
  using Layer::Layer;

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    if (top[0] == bottom[0]) fail("does not run in place; give the top its own name");
    top[0]->value = bottom[0]->value.view(top_shape(bottom[0]->value.shape()));
  }

  void forward(const std::vector<Blob*>&, const std::vector<Blob*>&, Context&) override {}

  // y[k] = x[k] for every flat index k, so dL/dx[k] = dL/dy[k]: dL/dx is dL/dy under x's shape.
  // The bottom's gradient is pointed at the top's storage here rather than in reshape because
  // the gradient tensors are sized by the Net after every reshape (and an input has none); the
  // layer below then reads dL/dy where it is, with no copy.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context&) override {
    if (propagate_down[0]) bottom[0]->grad = top[0]->grad.view(bottom[0]->value.shape());
  }

  BackwardReads backward_reads() const override { return {false, false}; }
  bool gradient_is_view() const override { return true; }

  // A Reshape to the top's shape, the batch dimension copied (0) so it stays symbolic.
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    const Shape& x = io.bottoms[0].shape;
    std::vector<int64_t> dims = io.tops[0].shape;
    if (dims.empty() || x.empty() || dims[0] != x[0]) {
      fail("changes the batch dimension " + shape_str(x) + " -> " + shape_str(io.tops[0].shape) +
           ", which an export with a symbolic batch cannot express");
    }
    dims[0] = 0;
    g.node("Reshape", {io.bottom(0), g.ints(io.top(0) + "/shape", dims)}, {io.top(0)});
  }

 protected:
  virtual Shape top_shape(const Shape& x) const = 0;
};

class FlattenLayer final : public ViewLayer {
 public:
  explicit FlattenLayer(const LayerSpec& spec) : ViewLayer(spec) {
    axis_ = spec.node->get<int>("axis", 1);
    end_axis_ = spec.node->get<int>("end_axis", -1);
  }

 private:
  Shape top_shape(const Shape& x) const override {
    const int ndim = int(x.size());
    const int a = canonical_axis(spec_, "axis", axis_, ndim);
    const int e = canonical_axis(spec_, "end_axis", end_axis_, ndim);
    if (e < a) {
      fail_at_key(spec_, "end_axis",
                  "axis " + std::to_string(e) + " comes before axis " + std::to_string(a) +
                      " of the " + std::to_string(ndim) + "-D bottom " + shape_str(x));
    }
    Shape y(x.begin(), x.begin() + a);
    y.push_back(shape_count(x, a, e + 1));
    y.insert(y.end(), x.begin() + e + 1, x.end());
    return y;
  }

  int axis_, end_axis_;
};

class ReshapeLayer final : public ViewLayer {
 public:
  explicit ReshapeLayer(const LayerSpec& spec) : ViewLayer(spec) {
    const ConfigNode& node = *spec.node;
    if (!node.has("shape"))
      fail_missing_key(spec, "shape", "required: the top's shape, e.g. [0, -1]");
    const ConfigNode& shape = node.at("shape");
    if (shape.is_map()) {
      dims_ = shape.get_list<int64_t>("dim");
      shape.check_no_unknown_keys("shape of layer '" + spec.name + "'");
    } else {
      dims_ = node.get_list<int64_t>("shape");
    }
    int inferred = 0;
    for (int64_t d : dims_) {
      if (d < -1) fail_at_key(spec, "shape", "extents must be positive, 0 (copy) or -1 (infer)");
      inferred += d == -1 ? 1 : 0;
    }
    if (inferred > 1) fail_at_key(spec, "shape", "at most one extent may be -1 (inferred)");
    axis_ = node.get<int>("axis", 0);
    num_axes_ = node.get<int>("num_axes", -1);
    if (num_axes_ < -1) fail_at_key(spec, "num_axes", "must be -1 (all) or a count >= 0");
  }

 private:
  Shape top_shape(const Shape& x) const override {
    const int ndim = int(x.size());
    const int start = axis_ >= 0 ? axis_ : ndim + axis_ + 1;  // -1: after the last axis
    if (start < 0 || start > ndim) {
      fail_at_key(spec_, "axis",
                  std::to_string(axis_) + " is out of range for the " + std::to_string(ndim) +
                      "-D bottom " + shape_str(x));
    }
    const int end = num_axes_ == -1 ? ndim : start + num_axes_;
    if (end > ndim) {
      fail_at_key(spec_, "num_axes",
                  "axes [" + std::to_string(start) + ", " + std::to_string(end) + ") go past the " +
                      std::to_string(ndim) + "-D bottom " + shape_str(x));
    }
    Shape y(x.begin(), x.begin() + start);
    int inferred = -1;
    for (size_t i = 0; i < dims_.size(); ++i) {
      int64_t d = dims_[i];
      if (d == 0) {
        if (start + int(i) >= ndim) {
          fail_at_key(spec_, "shape",
                      "0 at position " + std::to_string(i) + " copies axis " +
                          std::to_string(start + int(i)) + ", which the bottom " + shape_str(x) +
                          " does not have");
        }
        d = x[size_t(start) + i];
      }
      if (d == -1) inferred = int(y.size());
      y.push_back(d);
    }
    y.insert(y.end(), x.begin() + end, x.end());
    int64_t known = 1;
    for (size_t k = 0; k < y.size(); ++k) known *= int(k) == inferred ? 1 : y[k];
    const int64_t count = shape_numel(x);
    if (inferred >= 0) {
      if (known == 0 || count % known != 0) {
        fail_at_key(spec_, "shape",
                    "the bottom " + shape_str(x) + " has " + std::to_string(count) +
                        " elements, which the known extents (product " + std::to_string(known) +
                        ") do not divide; -1 cannot be inferred");
      }
      y[size_t(inferred)] = count / known;
    } else if (known != count) {
      fail_at_key(spec_, "shape",
                  "gives " + shape_str(y) + " (" + std::to_string(known) +
                      " elements) for the bottom " + shape_str(x) + " (" + std::to_string(count) +
                      " elements)");
    }
    return y;
  }

  std::vector<int64_t> dims_;  // as written: 0 copies, -1 infers
  int axis_, num_axes_;
};

}  // namespace

void register_reshape(LayerRegistry& registry) {
  registry.add<FlattenLayer>("Flatten");
  registry.add<ReshapeLayer>("Reshape");
}

}  // namespace crema
