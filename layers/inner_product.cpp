// InnerProduct (fully connected): y = x W^T + b.
//
//   x [M, K] (the input flattened from `axis` on: M = product of the axes before it),
//   W [N, K], b [N], y [M, N], with N = num_output. With axis -1 (the last, counted from the end
//   as PyTorch) on x [N, H, W, C], y is [N, H, W, num_output]: PyTorch's nn.Linear on a
//   channels-last tensor (ConvNeXt's blocks).
//
// YAML keys (defaults): num_output (required), axis (1; negative counts from the end), and the
// weight and bias keys of
//   WeightedLayer (weighted_layer.h): bias_term, weight_filler, bias_filler, param (lr_mult 0
//   freezes a parameter: no gradient), and math (the net's model.math, itself fp32 by default; or
//   tf32 or bf16: the three GEMMs on tensor cores with fp32 accumulation on a GPU,
//   kernels/gemm/gemm.h; fp32 on the CPU).
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemm/gemm.h"
#include "layers/layer_keys.h"
#include "layers/register_layers.h"
#include "layers/weighted_layer.h"

namespace crema {
namespace {

class InnerProductLayer final : public WeightedLayer {
 public:
  explicit InnerProductLayer(const LayerSpec& spec) : WeightedLayer(spec) {
    const ConfigNode& node = *spec.node;
    num_output_ = node.get<int64_t>("num_output");
    if (num_output_ <= 0) node.at("num_output").fail("num_output must be positive");
    axis_ = node.get<int>("axis", 1);
    math_ = read_math(spec);
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    const int axis = axis_ < 0 ? axis_ + x.ndim() : axis_;
    if (axis < 1 || axis > x.ndim()) {
      fail("axis " + std::to_string(axis_) + " is out of range for input " + shape_str(x.shape()));
    }
    axis_ = axis;
    create_weight_and_bias({num_output_, shape_count(x.shape(), axis_, x.ndim())}, num_output_,
                           ctx);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Tensor& x = bottom[0]->value;
    const int64_t k = shape_count(x.shape(), axis_, x.ndim());
    if (k != weight().value.dim(1)) {
      fail("input " + shape_str(x.shape()) + " has " + std::to_string(k) + " features from axis " +
           std::to_string(axis_) + ", the weights expect " + std::to_string(weight().value.dim(1)));
    }
    Shape y(x.shape().begin(), x.shape().begin() + axis_);
    y.push_back(num_output_);
    top[0]->value.reshape(y);
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor x = flat(bottom[0]->value);
    Tensor y = top[0]->value.view({x.dim(0), num_output_});
    kernels::gemm(ctx, false, true, 1.0f, x, weight().value, 0.0f, y, math_);
    if (bias_term_) kernels::add_bias_rows(ctx, bias().value, y);
  }

  // dL/dW += dy^T x ; dL/db += sum over rows of dy ; dL/dx = dy W. Frozen parameters (lr_mult
  // 0) get no gradient.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const Tensor x = flat(bottom[0]->value);
    const Tensor dy = top[0]->grad.view({x.dim(0), num_output_});
    if (Tensor* dw = weight_grad()) kernels::gemm(ctx, true, false, 1.0f, dy, x, 1.0f, *dw, math_);
    if (Tensor* db = bias_grad()) kernels::accumulate_bias_rows(ctx, dy, *db);
    if (propagate_down[0]) {
      Tensor dx = bottom[0]->grad.view(x.shape());
      kernels::gemm(ctx, false, false, 1.0f, dy, weight().value, 0.0f, dx, math_);
    }
  }

  // axis 1: Gemm(x, W^T) + b (after a Flatten of x's trailing axes); another axis: x's axes
  // from `axis` on flattened by a Reshape, then MatMul with W^T and Add b.
  // dL/dW reads x; dL/dx reads only dL/dy and W.
  BackwardReads backward_reads() const override { return {true, false}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    const Shape& x = io.bottoms[0].shape;
    const std::string& y = io.top(0);
    const std::string w = g.weight(params_[0].name, params_[0].value);
    const std::string b = bias_term_ ? g.weight(params_[1].name, params_[1].value) : "";
    std::string in = io.bottom(0);
    if (axis_ == 1) {
      if (x.size() > 2) {
        in = g.temp(y + "/flat");
        g.node("Flatten", {io.bottom(0)}, {in}, {{"axis", int64_t(1)}});
      }
      std::vector<std::string> inputs{in, w};
      if (bias_term_) inputs.push_back(b);
      g.node("Gemm", inputs, {y}, {{"transB", int64_t(1)}});
      return;
    }
    if (axis_ + 1 < int(x.size())) {
      std::vector<int64_t> dims{0};  // the batch, copied
      dims.insert(dims.end(), x.begin() + 1, x.begin() + axis_);
      dims.push_back(-1);
      in = g.temp(y + "/flat");
      g.node("Reshape", {io.bottom(0), g.ints(y + "/flat_shape", dims)}, {in});
    }
    const std::string wt = g.temp(y + "/weight_t");
    g.node("Transpose", {w}, {wt}, {{"perm", std::vector<int64_t>{1, 0}}});
    const std::string product = bias_term_ ? g.temp(y + "/matmul") : y;
    g.node("MatMul", {in, wt}, {product});
    if (bias_term_) g.node("Add", {product, b}, {y});
  }

 private:
  Tensor flat(const Tensor& t) const {
    const Shape& s = t.shape();
    return t.view({shape_count(s, 0, axis_), shape_count(s, axis_, int(s.size()))});
  }

  int64_t num_output_;
  int axis_;  // as written until setup, then in [1, ndim]
  kernels::cuda::GemmMath math_;
};

}  // namespace

void register_inner_product(LayerRegistry& registry) {
  registry.add<InnerProductLayer>("InnerProduct");
}

}  // namespace crema
