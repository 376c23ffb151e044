// LayerNorm: normalizes each position over one axis by its own mean and variance, then scales and
// shifts it per element of that axis (Ba, Kiros & Hinton 2016):
//   y[o, c, i] = (x[o, c, i] - mean[o, i]) / sqrt(var[o, i] + eps) * weight[c] + bias[c]
// mean and var (biased) over c, the normalized axis, for each position (o, i) of the others.
//
//   x, y: any shape, the same; C = x.dim(axis).
//   axis -1 (the default): PyTorch's nn.LayerNorm(C) on [..., C] (normalized_shape = the last
//     axis; ConvNeXt's blocks after their permute to NHWC, ViT's tokens).
//   axis 1 on [N, C, H, W]: over the channels at each (n, h, w), torchvision ConvNeXt's
//     LayerNorm2d (permute to NHWC, nn.LayerNorm, permute back) without the permutes.
// YAML keys (defaults): axis (-1; negative counts from the end), eps (1e-5, PyTorch's default;
//   torchvision's ConvNeXt uses 1e-6), elementwise_affine (true: learned "<layer>.weight" [C]
//   filled with 1 and "<layer>.bias" [C] filled with 0, PyTorch's names and shapes), param
//   (lr_mult / decay_mult of weight and bias).
// Not in place: the backward reads x.
// The statistics are computed in float32 in two passes (kernels/layer_norm/layer_norm.h).
// Dtypes and layouts (runs): f32 (and f64 on the CPU), bf16 and f16 on CUDA, with float32
// statistics, weight, bias and gradients; nchw or nhwc: the axis is the logical one either way
// (the channels, axis 1, of an nhwc map are rows in memory; under model.layout nhwc ConvNeXt's
// Permute hands the block's LayerNorm a plainly contiguous [N, H, W, C], layers/permute.cpp).
#include "kernels/layer_norm/layer_norm.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class LayerNormLayer final : public Layer {
 public:
  explicit LayerNormLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    axis_ = node.get<int>("axis", -1);
    eps_ = node.get<float>("eps", 1e-5f);
    if (!(eps_ > 0.0f)) fail_at_key(spec, "eps", "must be positive, got " + std::to_string(eps_));
    affine_ = node.get<bool>("elementwise_affine", true);
  }

  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>&, Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 1) fail("expects an input with at least one axis, got a scalar");
    axis_index_ = canonical_axis(spec_, "axis", axis_, x.ndim());
    channels_ = x.dim(axis_index_);
    if (affine_) {
      add_param("weight", {channels_}, ctx);
      ctx.fill(params_[0].value, 1.0f);
      add_param("bias", {channels_}, ctx);
      ctx.fill(params_[1].value, 0.0f);
    }
    // float32 statistics beside 16-bit tensors; float64 in the gradient check's double runs
    const DType statistics = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
    mean_ = ctx.empty({0}, statistics);
    rstd_ = ctx.empty({0}, statistics);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (top[0] == bottom[0]) fail("cannot run in place: the backward reads the input");
    const Tensor& x = bottom[0]->value;
    if (x.ndim() <= axis_index_ || x.dim(axis_index_) != channels_) {
      fail("input " + shape_str(x.shape()) + " must keep " + std::to_string(channels_) +
           " elements along axis " + std::to_string(axis_index_) + ", as at setup");
    }
    top[0]->value.reshape(x.shape());
    const int64_t positions = x.numel() / channels_;
    mean_.reshape({positions});
    rstd_.reshape({positions});
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    kernels::layer_norm_forward(ctx, bottom[0]->value, weight(), bias(), axis_index_, eps_,
                                top[0]->value, mean_, rstd_);
  }

  // With xhat = (x - mean) * rstd, y = xhat * w + b and g = dL/dy * w, over the C values of one
  // position (mean, rstd depend on all of them):
  //   dxhat_c/dx_k = rstd * (delta_ck - 1/C - xhat_c xhat_k / C)
  // (d mean/dx_k = 1/C; d rstd/dx_k = -rstd^3 (x_k - mean) / C = -rstd^2 xhat_k / C), so
  //   dL/dx_k = sum_c g_c dxhat_c/dx_k = rstd * (g_k - mean_c(g) - xhat_k * mean_c(g * xhat)).
  // dL/dw[c] += sum over positions of dL/dy * xhat, dL/db[c] += sum of dL/dy, which the kernel
  // adds on the way (deterministically: fixed-order sums of per-block partials on CUDA).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    Tensor* dx = propagate_down[0] ? &bottom[0]->grad : nullptr;
    Tensor* dweight = affine_ && !params_[0].frozen() ? &params_[0].grad : nullptr;
    Tensor* dbias = affine_ && !params_[1].frozen() ? &params_[1].grad : nullptr;
    if (dx == nullptr && dweight == nullptr && dbias == nullptr) return;
    kernels::layer_norm_backward(ctx, bottom[0]->value, top[0]->grad, weight(), mean_, rstd_,
                                 axis_index_, dx, dweight, dbias);
  }

  BackwardReads backward_reads() const override { return {true, false}; }  // x, not y

  // ONNX's LayerNormalization normalizes over every axis from `axis` on: over the last axis as
  // it is, over another one between two Transposes that make it the last.
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    const int ndim = int(io.bottoms[0].shape.size());
    const std::string& y = io.top(0);
    std::vector<std::string> inputs{io.bottom(0)};
    if (affine_) {
      inputs.push_back(g.weight(params_[0].name, params_[0].value));
      inputs.push_back(g.weight(params_[1].name, params_[1].value));
    } else {
      inputs.push_back(g.floats(y + "/ones", std::vector<float>(channels_, 1.0f), {channels_}));
    }
    const std::vector<GraphAttribute> attributes{{"axis", int64_t(-1)}, {"epsilon", eps_}};
    if (axis_index_ == ndim - 1) {
      g.node("LayerNormalization", inputs, {y}, attributes);
      return;
    }
    std::vector<int64_t> to_last, back(ndim);
    for (int d = 0; d < ndim; ++d) {
      if (d != axis_index_) to_last.push_back(d);
    }
    to_last.push_back(axis_index_);
    for (int d = 0; d < ndim; ++d) back[to_last[d]] = d;
    inputs[0] = g.temp(y + "/channels_last");
    g.node("Transpose", {io.bottom(0)}, {inputs[0]}, {{"perm", to_last}});
    const std::string normalized = g.temp(y + "/normalized");
    g.node("LayerNormalization", inputs, {normalized}, attributes);
    g.node("Transpose", {normalized}, {y}, {{"perm", back}});
  }

 private:
  const Tensor* weight() const { return affine_ ? &params_[0].value : nullptr; }
  const Tensor* bias() const { return affine_ ? &params_[1].value : nullptr; }

  int axis_ = -1, axis_index_ = 0;
  float eps_ = 1e-5f;
  bool affine_ = true;
  int64_t channels_ = 0;
  Tensor mean_, rstd_;  // [positions]: the forward's statistics, for the backward
};

}  // namespace

void register_layer_norm(LayerRegistry& registry) {
  registry.add<LayerNormLayer>("LayerNorm");
}

}  // namespace crema
