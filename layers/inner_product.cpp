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
//   tf32 or bf16: the three GEMMs of f32 tensors on tensor cores with fp32 accumulation on a GPU,
//   kernels/gemm/gemm.h; fp32 on the CPU).
//
// Dtypes (runs(); the Net's precision pass hands the layer what it runs): f32, and f64 on the CPU
// (the references); bf16 and f16 on CUDA (cuda::gemm_16bit: tensor cores on the operands as
// stored, fp32 accumulation, y rounded once, the bias added in the GEMM's store). Layout nchw
// only: the features of a 4-D input are its trailing axes in memory order, which an nhwc-stored
// [N, C, H, W] does not keep ([N, H, W, C] after ConvNeXt's Permute is a plain contiguous 4-D
// tensor, flagged nchw). The master weight and bias, and their gradients, are f32 in every
// dtype: a 16-bit input is multiplied by a compute copy of the weight in its dtype, refreshed
// from the master at each forward (kernels::convert); dW accumulates straight into the f32
// master gradient (the GEMM's C may be f32 with 16-bit operands) and db sums the 16-bit dy in
// fp32.
#include <algorithm>
#include <optional>

#include "kernels/elementwise/elementwise.h"
#include "kernels/gemm/gemm.h"
#include "kernels/layout/layout.h"
#include "layers/layer_keys.h"
#include "layers/layer_runs.h"
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

  bool runs(DType dtype, Layout layout, const Device& device) const override {
    return layout == Layout::nchw && kernels_run(dtype, device, /*half_on_cuda=*/true);
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

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    const int64_t k = shape_count(x.shape(), axis_, x.ndim());
    if (k != weight().value.dim(1)) {
      fail("input " + shape_str(x.shape()) + " has " + std::to_string(k) + " features from axis " +
           std::to_string(axis_) + ", the weights expect " + std::to_string(weight().value.dim(1)));
    }
    if (x.ndim() == 4 && x.layout() == Layout::nhwc && x.dim(1) > 1 && x.dim(2) * x.dim(3) > 1) {
      fail("input " + x.description() +
           " is stored nhwc, whose trailing axes are not the features in memory order; give the "
           "layer an nchw (contiguous) input");
    }
    Shape y(x.shape().begin(), x.shape().begin() + axis_);
    y.push_back(num_output_);
    top[0]->value.reshape(y);
    make_compute_weight(x.dtype(), ctx);
    shaped_ = Shaped{shape_count(x.shape(), 0, axis_), k, x.dtype()};
  }

  // y = x W^T + b: one GEMM, the bias added in its store (16-bit) or after it (f32, f64).
  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor x = flat(bottom[0]->value);
    Tensor y = top[0]->value.view({x.dim(0), num_output_});
    if (compute_weight_.defined()) kernels::convert(ctx, weight().value, compute_weight_);
    kernels::gemm(ctx, false, true, 1.0f, x, kernel_weight(), 0.0f, y, math_,
                  bias_term_ ? &bias().value : nullptr);
  }

  // The chain rule on y[m, n] = sum_k x[m, k] W[n, k] + b[n], with dy = dL/dy:
  //   dL/dW[n, k] = sum_m dL/dy[m, n] * dy[m, n]/dW[n, k] = sum_m dy[m, n] x[m, k]:  dW += dy^T x
  //   dL/db[n]    = sum_m dy[m, n] * 1:                                              db += 1^T dy
  //   dL/dx[m, k] = sum_n dy[m, n] * dy[m, n]/dx[m, k] = sum_n dy[m, n] W[n, k]:     dx = dy W
  // (parameter gradients accumulate, as in Caffe). Frozen parameters (lr_mult 0) get no gradient.
  // dW of 16-bit tensors: C f32 with beta 1 adds the fp32 product into the master gradient.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const Tensor x = flat(bottom[0]->value);
    const Tensor dy = top[0]->grad.view({x.dim(0), num_output_});
    if (Tensor* dw = weight_grad()) kernels::gemm(ctx, true, false, 1.0f, dy, x, 1.0f, *dw, math_);
    if (Tensor* db = bias_grad()) kernels::accumulate_bias_rows(ctx, dy, *db);
    if (propagate_down[0]) {
      Tensor dx = bottom[0]->grad.view(x.shape());
      kernels::gemm(ctx, false, false, 1.0f, dy, kernel_weight(), 0.0f, dx, math_);
    }
  }

  // dL/dW reads x; dL/dx reads only dL/dy and W.
  BackwardReads backward_reads() const override { return {true, false}; }

  // The most workspace one pass's GEMMs (and the 16-bit bias gradient) take at the last reshape's
  // shapes: x [M, K], W [N, K].
  int64_t workspace_bytes(const Device& device, bool backward, bool bottom_grad) const override {
    if (!shaped_) return 0;
    const auto [M, K, dtype] = *shaped_;
    const int64_t N = num_output_;
    size_t most = kernels::gemm_workspace_bytes(device, false, true, M, N, K, dtype, math_);
    if (backward && !params_[0].frozen()) {
      most =
          std::max(most, kernels::gemm_workspace_bytes(device, true, false, N, K, M, dtype, math_));
    }
    if (backward && bias_term_ && !params_[1].frozen()) {
      most = std::max(most, kernels::accumulate_bias_rows_workspace_bytes(device, M, N, dtype));
    }
    if (backward && bottom_grad) {
      most = std::max(most,
                      kernels::gemm_workspace_bytes(device, false, false, M, K, N, dtype, math_));
    }
    return int64_t(most);
  }

  // axis 1: Gemm(x, W^T) + b (after a Flatten of x's trailing axes); another axis: x's axes
  // from `axis` on flattened by a Reshape, then MatMul with W^T and Add b.

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

  // The compute copy of the weight for a 16-bit input, made at the first reshape (the Net counts
  // it as the layer's state) and again when the input's dtype changes; none for f32 and f64.
  void make_compute_weight(DType dtype, Context& ctx) {
    if (dtype != DType::bf16 && dtype != DType::f16) {
      compute_weight_ = Tensor();
    } else if (!compute_weight_.defined() || compute_weight_.dtype() != dtype) {
      compute_weight_ = ctx.empty(weight().value.shape(), dtype);
    }
  }
  const Tensor& kernel_weight() {
    return compute_weight_.defined() ? compute_weight_ : weight().value;
  }

  int64_t num_output_;
  int axis_;  // as written until setup, then in [1, ndim]
  kernels::cuda::GemmMath math_;
  Tensor compute_weight_;  // W [N, K] in the input's 16-bit dtype; undefined: the master is read
  // The last reshape's x [M, K] and dtype, for workspace_bytes.
  struct Shaped {
    int64_t M, K;
    DType dtype;
  };
  std::optional<Shaped> shaped_;
};

}  // namespace

void register_inner_product(LayerRegistry& registry) {
  registry.add<InnerProductLayer>("InnerProduct");
}

}  // namespace crema
