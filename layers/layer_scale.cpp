// LayerScale: a learned per-channel factor, ConvNeXt's (Liu et al. 2022, "A ConvNet for the
// 2020s"; from Touvron et al. 2021, "Going deeper with Image Transformers", CaiT).
//
//   x [N, C, ...], gamma [C, 1, ..., 1] (one 1 per axis after C: [C, 1, 1] for NCHW)
//   y[n, c, ...] = gamma[c] * x[n, c, ...]
//
// The parameter is "<layer>.layer_scale", torchvision's name and shape: its CNBlock holds
// `layer_scale` [C, 1, 1] beside its `block`, so a layer named `features.1.0` reads
// `features.1.0.layer_scale` from a torchvision state_dict. (Scale with num_axes 1 computes the
// same, but its parameter is "<layer>.weight" of shape [C].)
// YAML keys (defaults): filler ({type: constant, value: 1e-6}: torchvision's layer_scale init),
//   param: {layer_scale: {lr_mult, decay_mult}} (lr_mult 0 freezes it).
// Runs in place (top == bottom), keeping a copy of x for gamma's gradient.
// Dtypes and layouts (runs): nchw or nhwc (the channels then are rows of C in memory); bf16 and
// f16 on CUDA too, gamma and its gradient float32 (kernels/scale/scale.h).
#include "kernels/scale/scale.h"
#include "layers/filler.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class LayerScaleLayer final : public Layer {
 public:
  explicit LayerScaleLayer(const LayerSpec& spec) : Layer(spec) {
    FillerSpec init;
    init.value = 1e-6;
    filler_ = read_filler(*spec.node, "filler", init);
  }

  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>&, Context& ctx) override {
    add_param("layer_scale", param_shape(bottom[0]->value.shape()), ctx);
    fill_tensor(filler_, ctx.random(), params_[0].value);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Shape& x = bottom[0]->value.shape();
    if (param_shape(x) != params_[0].value.shape()) {
      fail("parameter " + params_[0].name + " is " + shape_str(params_[0].value.shape()) +
           ", but the bottom " + shape_str(x) + " needs " + shape_str(param_shape(x)));
    }
    in_place_ = top[0] == bottom[0];
    if (!in_place_) {
      top[0]->value.reshape(x);
    } else if (x_copy_.defined()) {
      x_copy_.reshape(x);
    } else {
      x_copy_ = ctx.empty(x, bottom[0]->value.dtype());
    }
    if (in_place_) x_copy_.set_layout(bottom[0]->value.layout());
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (in_place_ && !params_[0].frozen()) ctx.copy(x_copy_, bottom[0]->value);
    kernels::scale_forward(ctx, bottom[0]->value, &params_[0].value, nullptr, 1, 1, top[0]->value);
  }

  // dL/dgamma[c] += sum_{n, i} dL/dy[n, c, i] * x[n, c, i];  dL/dx[n, c, i] = dL/dy[n, c, i] *
  // gamma[c]. In place dL/dy and dL/dx are one tensor: the sum reads it first.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const Tensor& dy = top[0]->grad;
    if (!params_[0].frozen()) {
      const Tensor& x = in_place_ ? x_copy_ : bottom[0]->value;
      kernels::channel_reduce(ctx, dy, &x, 1, 1, true, params_[0].grad);
    }
    if (propagate_down[0]) {
      kernels::scale_forward(ctx, dy, &params_[0].value, nullptr, 1, 1, bottom[0]->grad);
    }
  }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    g.node("Mul", {io.bottom(0), g.weight(params_[0].name, params_[0].value)}, {io.top(0)});
  }

 private:
  // [C, 1, ..., 1] for x [N, C, ...].
  Shape param_shape(const Shape& x) const {
    if (x.size() < 2) fail("expects an input [N, C, ...], got " + shape_str(x));
    Shape s(x.size() - 1, 1);
    s[0] = x[1];
    return s;
  }

  FillerSpec filler_;
  bool in_place_ = false;
  Tensor x_copy_;  // in place: x, which y overwrites and gamma's gradient needs
};

}  // namespace

void register_layer_scale(LayerRegistry& registry) {
  registry.add<LayerScaleLayer>("LayerScale");
}

}  // namespace crema
