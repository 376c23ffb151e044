#include "layers/graph_forms.h"

#include <cmath>
#include <string>

namespace crema {
namespace {

// A float scalar constant.
std::string scalar(GraphBuilder& g, const std::string& hint, float value) {
  return g.floats(hint, {value}, {});
}

}  // namespace

void export_activation(const kernels::Activation& a, const LayerIO& io, GraphBuilder& g) {
  const std::string& x = io.bottom(0);
  const std::string& y = io.top(0);
  const std::string base = y + "/";
  using Kind = kernels::ActivationKind;
  switch (a.kind) {
    case Kind::elu:
      g.node("Elu", {x}, {y}, {{"alpha", a.alpha}});
      return;
    case Kind::sigmoid:
      g.node("Sigmoid", {x}, {y});
      return;
    case Kind::tanh:
      g.node("Tanh", {x}, {y});
      return;
    case Kind::hardsigmoid:
      g.node("HardSigmoid", {x}, {y}, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}});
      return;
    case Kind::hardswish:
      g.node("HardSwish", {x}, {y});
      return;
    case Kind::softsign:
      g.node("Softsign", {x}, {y});
      return;
    case Kind::mish: {  // ONNX's Mish is opset 18; opset 17 spells it out
      const std::string softplus = g.temp(base + "softplus"), t = g.temp(base + "tanh");
      g.node("Softplus", {x}, {softplus});
      g.node("Tanh", {softplus}, {t});
      g.node("Mul", {x, t}, {y});
      return;
    }
    case Kind::clip:
      g.node("Clip", {x, scalar(g, base + "min", a.min), scalar(g, base + "max", a.max)}, {y});
      return;
    case Kind::swish: {
      std::string bx = x;
      if (a.beta != 1.0f) {
        bx = g.temp(base + "beta_x");
        g.node("Mul", {x, scalar(g, base + "beta", a.beta)}, {bx});
      }
      const std::string s = g.temp(base + "sigmoid");
      g.node("Sigmoid", {bx}, {s});
      g.node("Mul", {x, s}, {y});
      return;
    }
    case Kind::gelu_erf: {
      const std::string scaled = g.temp(base + "x_over_sqrt2");
      g.node("Div", {x, scalar(g, base + "sqrt2", float(std::sqrt(2.0)))}, {scaled});
      const std::string erf = g.temp(base + "erf");
      g.node("Erf", {scaled}, {erf});
      const std::string one_plus = g.temp(base + "one_plus_erf");
      g.node("Add", {erf, scalar(g, base + "one", 1.0f)}, {one_plus});
      const std::string half_x = g.temp(base + "half_x");
      g.node("Mul", {x, scalar(g, base + "half", 0.5f)}, {half_x});
      g.node("Mul", {half_x, one_plus}, {y});
      return;
    }
    case Kind::gelu_tanh: {
      const std::string x2 = g.temp(base + "x2"), x3 = g.temp(base + "x3");
      g.node("Mul", {x, x}, {x2});
      g.node("Mul", {x2, x}, {x3});
      const std::string cx3 = g.temp(base + "c_x3"), inner = g.temp(base + "inner");
      g.node("Mul", {x3, scalar(g, base + "c", 0.044715f)}, {cx3});
      g.node("Add", {x, cx3}, {inner});
      const std::string arg = g.temp(base + "tanh_arg"), t = g.temp(base + "tanh");
      g.node("Mul", {inner, scalar(g, base + "sqrt_2_over_pi", float(std::sqrt(2.0 / M_PI)))},
             {arg});
      g.node("Tanh", {arg}, {t});
      const std::string one_plus = g.temp(base + "one_plus_tanh"), half_x = g.temp(base + "half_x");
      g.node("Add", {t, scalar(g, base + "one", 1.0f)}, {one_plus});
      g.node("Mul", {x, scalar(g, base + "half", 0.5f)}, {half_x});
      g.node("Mul", {half_x, one_plus}, {y});
      return;
    }
  }
}

}  // namespace crema
