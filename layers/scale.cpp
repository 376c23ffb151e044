// Scale and Bias: a per-channel multiplier and/or offset, broadcast over the other axes (Caffe's
// Scale and Bias; the learned affine step that follows Caffe's BatchNorm).
//
//   Scale:  y[o, c, i] = x[o, c, i] * scale[c]  (+ bias[c] with bias_term)
//   Bias:   y[o, c, i] = x[o, c, i] + bias[c]
// x is viewed as [outer, C, inner], the C "channels" being x's axes [axis, axis + num_axes):
// x [N, C, H, W] with the defaults axis 1, num_axes 1 has scale [C]. The scale (bias) is a
// learned parameter "<layer>.weight" ("<layer>.bias") of shape x.shape[axis : axis + num_axes],
// or, with a second bottom, that bottom (its shape must equal x's extents from `axis` on, over
// its own rank; num_axes is then unused; a scalar second bottom scales everything). With
// bias_term, Scale also learns a bias "<layer>.bias" of the scale's shape.
// YAML keys (defaults):
//   Scale: axis (1), num_axes (1; -1: every axis from axis), filler ({type: constant, value: 1}),
//          bias_term (false), bias_filler ({type: constant, value: 0})
//   Bias:  axis (1), num_axes (1), filler ({type: constant, value: 0})
// Both run in place (top == first bottom: BatchNorm -> Scale in place, as in Caffe's ResNets);
// Scale then keeps a copy of x for the scale's gradient.
// Dtypes and layouts (Scale's runs; Bias runs f32 nchw): f32 (f64 on the CPU), bf16 and f16 on
// CUDA (learned parameters float32; a second bottom and its gradient in x's dtype); nchw, or
// nhwc for the channels (axis 1, one axis) and for squeeze-excitation's gate (axis 0 with a
// second bottom [N, C]), which run as rows of C in memory (kernels/scale/scale.h).
#include <string>

#include "kernels/scale/scale.h"
#include "layers/filler.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

// What Scale and Bias share: the keys that place the channels, the learned parameter or second
// bottom, and the checks.
class ChannelLayer : public Layer {
 public:
  explicit ChannelLayer(const LayerSpec& spec) : Layer(spec) {
    axis_ = spec.node->get<int>("axis", 1);
    num_axes_ = spec.node->get<int>("num_axes", 1);
    if (num_axes_ < -1) fail_at_key(spec, "num_axes", "must be -1 (all from axis) or a count >= 0");
  }

  int max_bottoms() const override { return 2; }

  // The scale or bias operand shaped for ONNX's broadcasting against x: its extents, then a 1
  // for each axis of x after them (a parameter stored so; a second bottom through a Reshape
  // whose 0 copies the batch).
  std::string broadcast_operand(const LayerIO& io, GraphBuilder& g, const Param* p) const {
    const size_t trailing = io.bottoms[0].shape.size() - size_t(axis_index_ + n_axes_);
    if (p != nullptr) {
      Shape s = p->value.shape();
      s.resize(s.size() + trailing, 1);
      return g.weight(p->name, p->value, s);
    }
    if (trailing == 0) return io.bottom(1);
    std::vector<int64_t> dims = io.bottoms[1].shape;
    if (axis_index_ == 0 && !dims.empty()) dims[0] = 0;
    dims.resize(dims.size() + trailing, 1);
    const std::string shaped = g.temp(io.top(0) + "/operand");
    g.node("Reshape", {io.bottom(1), g.ints(io.top(0) + "/operand_shape", dims)}, {shaped});
    return shaped;
  }

 protected:
  // Decides axis_index_ and n_axes_ from the bottoms, and returns the channel tensor's shape.
  Shape place_channels(const std::vector<Blob*>& bottom) {
    const Shape& x = bottom[0]->value.shape();
    const int ndim = int(x.size());
    if (bottom.size() > 1) {
      const Shape& s = bottom[1]->value.shape();
      // A scalar scales every element: any axis gives the same result, 0 the simplest view.
      axis_index_ = s.empty() ? 0 : canonical_axis(spec_, "axis", axis_, ndim);
      n_axes_ = int(s.size());
      const bool fits = axis_index_ + n_axes_ <= ndim &&
                        Shape(x.begin() + axis_index_, x.begin() + axis_index_ + n_axes_) == s;
      if (!fits) {
        fail_at_key(spec_, "axis",
                    "bottom '" + spec_.bottoms[1] + "' " + shape_str(s) +
                        " must equal the extents of bottom '" + spec_.bottoms[0] + "' " +
                        shape_str(x) + " from axis " + std::to_string(axis_index_) + " on");
      }
      return s;
    }
    axis_index_ = canonical_axis(spec_, "axis", axis_, ndim);
    n_axes_ = num_axes_ == -1 ? ndim - axis_index_ : num_axes_;
    if (axis_index_ + n_axes_ > ndim) {
      fail_at_key(spec_, "num_axes",
                  "axes [" + std::to_string(axis_index_) + ", " +
                      std::to_string(axis_index_ + n_axes_) + ") go past the bottom " +
                      shape_str(x));
    }
    return Shape(x.begin() + axis_index_, x.begin() + axis_index_ + n_axes_);
  }

  // A learned parameter keeps the shape it was created with; a later bottom must still fit it.
  void check_param_fits(const Param& p, const Shape& wanted) const {
    if (p.value.shape() != wanted) {
      fail("parameter " + p.name + " is " + shape_str(p.value.shape()) +
           ", but the bottom now needs " + shape_str(wanted));
    }
  }

  void reshape_top(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    if (bottom.size() > 1 && top[0] == bottom[1]) {
      fail("cannot run in place on its second bottom '" + spec_.bottoms[1] + "'");
    }
    in_place_ = top[0] == bottom[0];
    if (!in_place_) top[0]->value.reshape(bottom[0]->value.shape());
  }

  int axis_, num_axes_;  // as written
  int axis_index_ = 0, n_axes_ = 0;
  bool in_place_ = false;
};

class ScaleLayer final : public ChannelLayer {
 public:
  explicit ScaleLayer(const LayerSpec& spec) : ChannelLayer(spec) {
    FillerSpec one;
    one.value = 1.0;
    filler_ = read_filler(*spec.node, "filler", one);
    bias_term_ = spec.node->get<bool>("bias_term", false);
    bias_filler_ = read_filler(*spec.node, "bias_filler", FillerSpec{});
  }

  // nhwc where the channels are those of the map (axis 1, one axis, or a second bottom, whose
  // rank is unknown here: one of [C]) or a second bottom [N, C] at axis 0; the kernels refuse,
  // naming the axes, a second bottom of another rank. (Bias keeps the default: its second
  // bottom would be a 16-bit bias, which the kernels do not take.)
  bool runs(DType dtype, Layout layout, const Device& device) const override {
    if (!kernels_run(dtype, device, true)) return false;
    if (layout == Layout::nchw) return true;
    const bool second_bottom = spec_.bottoms.size() > 1;
    return (axis_ == 1 && (num_axes_ == 1 || second_bottom)) || (axis_ == 0 && second_bottom);
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>&, Context& ctx) override {
    const Shape shape = place_channels(bottom);
    if (bottom.size() == 1) {
      add_param("weight", shape, ctx);
      fill_tensor(filler_, ctx.random(), params_.back().value);
    }
    if (bias_term_) {
      bias_index_ = add_param("bias", shape, ctx);
      fill_tensor(bias_filler_, ctx.random(), params_.back().value);
    }
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Shape shape = place_channels(bottom);
    for (const Param& p : params_) check_param_fits(p, shape);
    reshape_top(bottom, top);
    if (in_place_) {
      if (!x_copy_.defined()) x_copy_ = ctx.empty({0}, bottom[0]->value.dtype());
      x_copy_.reshape(bottom[0]->value.shape());
      x_copy_.set_layout(bottom[0]->value.layout());
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const bool scale_grad_possible = bottom.size() > 1 || !params_[0].frozen();
    if (in_place_ && scale_grad_possible) ctx.copy(x_copy_, bottom[0]->value);
    kernels::scale_forward(ctx, bottom[0]->value, &scale(bottom), bias_value(), axis_index_,
                           n_axes_, top[0]->value);
  }

  // dL/dx[o,c,i] = dL/dy[o,c,i] * scale[c];  dL/dscale[c] = sum_{o,i} dL/dy[o,c,i] * x[o,c,i];
  // dL/dbias[c] = sum_{o,i} dL/dy[o,c,i]. In place, dL/dy and dL/dx are one tensor, so the two
  // sums, which read dL/dy, come before dL/dx overwrites it. Parameter gradients accumulate; the
  // second bottom's gradient is written.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const Tensor& dy = top[0]->grad;
    const Tensor& x = in_place_ ? x_copy_ : bottom[0]->value;
    if (bias_term_ && !params_[bias_index_].frozen()) {
      kernels::channel_reduce(ctx, dy, nullptr, axis_index_, n_axes_, true,
                              params_[bias_index_].grad);
    }
    if (bottom.size() == 1 && !params_[0].frozen()) {
      kernels::channel_reduce(ctx, dy, &x, axis_index_, n_axes_, true, params_[0].grad);
    } else if (bottom.size() > 1 && propagate_down[1]) {
      kernels::channel_reduce(ctx, dy, &x, axis_index_, n_axes_, false, bottom[1]->grad);
    }
    if (propagate_down[0]) {
      kernels::scale_forward(ctx, dy, &scale(bottom), nullptr, axis_index_, n_axes_,
                             bottom[0]->grad);
    }
  }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    const std::string s = broadcast_operand(io, g, io.bottoms.size() > 1 ? nullptr : &params_[0]);
    const std::string scaled = bias_term_ ? g.temp(io.top(0) + "/scaled") : io.top(0);
    g.node("Mul", {io.bottom(0), s}, {scaled});
    if (bias_term_) {
      g.node("Add", {scaled, broadcast_operand(io, g, &params_[bias_index_])}, {io.top(0)});
    }
  }

 private:
  const Tensor& scale(const std::vector<Blob*>& bottom) const {
    return bottom.size() > 1 ? bottom[1]->value : params_[0].value;
  }
  const Tensor* bias_value() const { return bias_term_ ? &params_[bias_index_].value : nullptr; }

  FillerSpec filler_, bias_filler_;
  bool bias_term_ = false;
  size_t bias_index_ = 0;
  Tensor x_copy_;  // in place: x, which y overwrites and the scale's gradient needs
};

class BiasLayer final : public ChannelLayer {
 public:
  explicit BiasLayer(const LayerSpec& spec) : ChannelLayer(spec) {
    filler_ = read_filler(*spec.node, "filler", FillerSpec{});
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>&, Context& ctx) override {
    const Shape shape = place_channels(bottom);
    if (bottom.size() == 1) {
      add_param("bias", shape, ctx);
      fill_tensor(filler_, ctx.random(), params_[0].value);
    }
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Shape shape = place_channels(bottom);
    for (const Param& p : params_) check_param_fits(p, shape);
    reshape_top(bottom, top);
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& bias = bottom.size() > 1 ? bottom[1]->value : params_[0].value;
    kernels::scale_forward(ctx, bottom[0]->value, nullptr, &bias, axis_index_, n_axes_,
                           top[0]->value);
  }

  // dL/dx = dL/dy (nothing to do in place, where they are one tensor);
  // dL/dbias[c] = sum_{o,i} dL/dy[o,c,i], accumulated for the parameter, written for a bottom.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const Tensor& dy = top[0]->grad;
    if (bottom.size() == 1 && !params_[0].frozen()) {
      kernels::channel_reduce(ctx, dy, nullptr, axis_index_, n_axes_, true, params_[0].grad);
    } else if (bottom.size() > 1 && propagate_down[1]) {
      kernels::channel_reduce(ctx, dy, nullptr, axis_index_, n_axes_, false, bottom[1]->grad);
    }
    if (propagate_down[0] && !in_place_) ctx.copy(bottom[0]->grad, dy);
  }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    const std::string b = broadcast_operand(io, g, io.bottoms.size() > 1 ? nullptr : &params_[0]);
    g.node("Add", {io.bottom(0), b}, {io.top(0)});
  }

 private:
  FillerSpec filler_;
};

}  // namespace

void register_scale(LayerRegistry& registry) {
  registry.add<ScaleLayer>("Scale");
  registry.add<BiasLayer>("Bias");
}

}  // namespace crema
