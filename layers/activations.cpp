// The pointwise activation layers without parameters: ELU, Sigmoid, TanH, Clip, Swish (= SiLU),
// GELU, Hardsigmoid, Hardswish, Mish, Softsign. Each maps every element on its own:
//
//   x, y: any shape, the same.   forward y = f(x);   backward dL/dx = dL/dy * f'(x)
//
// The formulas and derivatives are in kernels/activations/pointwise.h; each layer below gives its
// own, its YAML keys and its paper. All run in place (top == bottom): ELU, Sigmoid and TanH for
// free, since their derivative follows from y; Clip, Swish, GELU, Hardsigmoid, Hardswish, Mish and
// Softsign need x, so in place they copy x aside before the forward overwrites it (one extra tensor
// and one copy per step, which the out-of-place form does not pay).
#include <string>

#include "kernels/activations/pointwise.h"
#include "layers/graph_forms.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

// One bottom, one top of its shape, forward and backward through kernels::activation_*.
class PointwiseLayer : public Layer {
 public:
  PointwiseLayer(const LayerSpec& spec, kernels::ActivationKind kind) : Layer(spec) {
    activation_.kind = kind;
  }

  // Elementwise: either layout; bf16 and f16 on CUDA too (layers/layer_runs.h).
  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Shape& shape = bottom[0]->value.shape();
    if (top[0] != bottom[0]) {
      top[0]->value.reshape(shape);
    } else if (reads_input()) {
      if (saved_input_.defined()) {
        saved_input_.reshape(shape);
      } else {
        saved_input_ = ctx.empty(shape, bottom[0]->value.dtype());
      }
      saved_input_.set_layout(bottom[0]->value.layout());
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (top[0] == bottom[0] && reads_input()) ctx.copy(saved_input_, bottom[0]->value);
    kernels::activation_forward(ctx, activation_, bottom[0]->value, top[0]->value);
  }

  // dL/dx = dL/dy * f'(x), with f'(x) computed from y (ELU, Sigmoid, TanH) or from x (the input,
  // or its copy when the layer ran in place).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    const Tensor& saved = !reads_input()        ? top[0]->value
                          : top[0] == bottom[0] ? saved_input_
                                                : bottom[0]->value;
    kernels::activation_backward(ctx, activation_, saved, top[0]->grad, bottom[0]->grad);
  }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    export_activation(activation_, io, g);
  }

 protected:
  // Throws "file:line:col: layer 'name' (Type): key: message", pointing at the key's value.
  [[noreturn]] void fail_key(const std::string& key, const std::string& message) const {
    spec_.node->at(key).fail("layer '" + name() + "' (" + type() + "): " + key + ": " + message);
  }

  kernels::Activation activation_;

 private:
  bool reads_input() const {
    return kernels::backward_reads(activation_.kind) == kernels::BackwardReads::input;
  }

  Tensor saved_input_;  // x's copy when running in place and the backward reads x
};

// ELU: y = x > 0 ? x : alpha * (exp(x) - 1);  dy/dx = 1 for x > 0, y + alpha otherwise.
// YAML keys (defaults): alpha (1; must be >= 0, so that y > 0 exactly where x > 0).
// Clevert, Unterthiner & Hochreiter 2015, "Fast and Accurate Deep Network Learning by
// Exponential Linear Units".
class ELULayer final : public PointwiseLayer {
 public:
  explicit ELULayer(const LayerSpec& spec) : PointwiseLayer(spec, kernels::ActivationKind::elu) {
    activation_.alpha = spec.node->get<float>("alpha", 1.0f);
    if (activation_.alpha < 0.0f) {
      fail_key("alpha", "must not be negative (y > 0 must tell x > 0), got " +
                            std::to_string(activation_.alpha));
    }
  }
};

// Sigmoid: y = 1 / (1 + exp(-x));  dy/dx = y * (1 - y). No keys.
class SigmoidLayer final : public PointwiseLayer {
 public:
  explicit SigmoidLayer(const LayerSpec& spec)
      : PointwiseLayer(spec, kernels::ActivationKind::sigmoid) {}
};

// TanH: y = tanh(x);  dy/dx = 1 - y^2. No keys.
class TanHLayer final : public PointwiseLayer {
 public:
  explicit TanHLayer(const LayerSpec& spec) : PointwiseLayer(spec, kernels::ActivationKind::tanh) {}
};

// Clip: y = min(max(x, min), max);  dy/dx = 1 where min <= x <= max (ends included, PyTorch's
// clamp), 0 elsewhere. ReLU6 is Clip with min 0, max 6 (PyTorch's relu6 excludes the ends, which
// matters only for inputs exactly 0 or 6).
// YAML keys: min, max (both required, as in Caffe; min <= max).
class ClipLayer final : public PointwiseLayer {
 public:
  explicit ClipLayer(const LayerSpec& spec) : PointwiseLayer(spec, kernels::ActivationKind::clip) {
    const ConfigNode& node = *spec.node;
    for (const char* key : {"min", "max"}) {
      if (!node.has(key)) fail_missing_key(spec, key, "required (Clip: min, max)");
    }
    activation_.min = node.get<float>("min");
    activation_.max = node.get<float>("max");
    if (!(activation_.min <= activation_.max)) {
      fail_key("max", "must not be less than min (" + std::to_string(activation_.min) + "), got " +
                          std::to_string(activation_.max));
    }
  }
};

// Swish: y = x * sigmoid(beta * x);  dy/dx = s + beta * x * s * (1 - s), s = sigmoid(beta * x).
// With beta = 1 it is SiLU (PyTorch's nn.SiLU); type SiLU is the same layer.
// YAML keys (defaults): beta (1).
// Ramachandran, Zoph & Le 2017, "Searching for Activation Functions"; Elfwing et al. 2017 (SiLU).
class SwishLayer final : public PointwiseLayer {
 public:
  explicit SwishLayer(const LayerSpec& spec)
      : PointwiseLayer(spec, kernels::ActivationKind::swish) {
    activation_.beta = spec.node->get<float>("beta", 1.0f);
  }
};

// GELU: y = x * Phi(x), Phi the standard normal CDF (approximate: none, the default), or its tanh
// approximation y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) (approximate: tanh); both
// as PyTorch's nn.GELU. Derivatives in kernels/activations/pointwise.h.
// YAML keys (defaults): approximate (none | tanh).
// Hendrycks & Gimpel 2016, "Gaussian Error Linear Units (GELUs)".
class GELULayer final : public PointwiseLayer {
 public:
  explicit GELULayer(const LayerSpec& spec)
      : PointwiseLayer(spec, kernels::ActivationKind::gelu_erf) {
    const std::string approximate = spec.node->get<std::string>("approximate", "none");
    if (approximate == "tanh") {
      activation_.kind = kernels::ActivationKind::gelu_tanh;
    } else if (approximate != "none") {
      fail_key("approximate", "must be none or tanh, got '" + approximate + "'");
    }
  }
};

// Hardsigmoid: y = min(max(x + 3, 0), 6) / 6;  dy/dx = 1/6 for -3 < x < 3, 0 elsewhere (0 at the
// kinks, as PyTorch). MobileNetV3's squeeze-excitation gate. No keys.
// Howard et al. 2019, "Searching for MobileNetV3".
class HardsigmoidLayer final : public PointwiseLayer {
 public:
  explicit HardsigmoidLayer(const LayerSpec& spec)
      : PointwiseLayer(spec, kernels::ActivationKind::hardsigmoid) {}
};

// Hardswish: y = x * min(max(x + 3, 0), 6) / 6;  dy/dx = 0 for x < -3, x/3 + 1/2 for -3 <= x < 3,
// 1 for x >= 3 (torch 1.13's vectorized CPU values at the kinks; kernels/activations/README.md
// says where PyTorch differs). MobileNetV3's activation. No keys.
// Howard et al. 2019, "Searching for MobileNetV3".
class HardswishLayer final : public PointwiseLayer {
 public:
  explicit HardswishLayer(const LayerSpec& spec)
      : PointwiseLayer(spec, kernels::ActivationKind::hardswish) {}
};

// Mish: y = x * tanh(softplus(x)), softplus(x) = log(1 + exp(x));
// dy/dx = t + x * sigmoid(x) * (1 - t^2), t = tanh(softplus(x)) (the chain rule through
// softplus' = sigmoid and tanh' = 1 - tanh^2). PyTorch's nn.Mish. No keys.
// Misra 2019, "Mish: A Self Regularized Non-Monotonic Activation Function".
class MishLayer final : public PointwiseLayer {
 public:
  explicit MishLayer(const LayerSpec& spec) : PointwiseLayer(spec, kernels::ActivationKind::mish) {}
};

// Softsign: y = x / (1 + |x|);  dy/dx = 1 / (1 + |x|)^2 (the quotient rule: (1 + |x|) - x sign(x)
// over (1 + |x|)^2, and x sign(x) = |x|). PyTorch's nn.Softsign. No keys.
// Glorot and Bengio 2010, "Understanding the difficulty of training deep feedforward neural
// networks".
class SoftsignLayer final : public PointwiseLayer {
 public:
  explicit SoftsignLayer(const LayerSpec& spec)
      : PointwiseLayer(spec, kernels::ActivationKind::softsign) {}
};

}  // namespace

void register_activations(LayerRegistry& registry) {
  registry.add<ELULayer>("ELU");
  registry.add<SigmoidLayer>("Sigmoid");
  registry.add<TanHLayer>("TanH");
  registry.add<ClipLayer>("Clip");
  registry.add<SwishLayer>("Swish");
  registry.add<SwishLayer>("SiLU");
  registry.add<GELULayer>("GELU");
  registry.add<HardsigmoidLayer>("Hardsigmoid");
  registry.add<HardswishLayer>("Hardswish");
  registry.add<MishLayer>("Mish");
  registry.add<SoftsignLayer>("Softsign");
}

}  // namespace crema
