// StochasticDepth: in training, each sample's whole tensor is zeroed with probability p and the
// kept samples are scaled by 1 / (1 - p), so that in the test phase the layer is the identity
// (Huang et al. 2016, "Deep Networks with Stochastic Depth"; torchvision.ops.StochasticDepth,
// which EfficientNet and ConvNeXt apply to a residual branch before the addition).
//
//   x, y: [N, ...], the same shape.   row:   y[n, ...] = keep[n] ? x[n, ...] / (1 - p) : 0
//                                      batch: y = keep ? x / (1 - p) : 0   (one draw for all)
//
// YAML keys (defaults): p (required, in [0, 1)), mode (row | batch, torchvision's names).
// The draws are kernels/dropout's hash of (seed, step, n) (dropout.h): the CPU and the GPU keep the
// same samples, the backward recomputes the forward's mask, the step is a device counter advanced
// by each training forward (run state, saved in checkpoints as Dropout's). Runs in place.
#include "kernels/dropout/dropout.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class StochasticDepthLayer final : public Layer {
 public:
  explicit StochasticDepthLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    if (!node.has("p")) fail_missing_key(spec, "p", "required: the probability to drop a sample");
    p_ = node.get<float>("p");
    if (!(p_ >= 0.0f && p_ < 1.0f)) {
      fail_at_key(spec, "p", "must be in [0, 1), got " + std::to_string(p_));
    }
    const std::string mode = node.get<std::string>("mode", "row");
    if (mode != "row" && mode != "batch") {
      fail_at_key(spec, "mode", "must be row or batch, got '" + mode + "'");
    }
    batch_ = mode == "batch";
  }

  void setup(const std::vector<Blob*>&, const std::vector<Blob*>&, Context& ctx) override {
    seed_ = ctx.random().next();
    step_ = kernels::dropout_step_counter(ctx);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Shape& x = bottom[0]->value.shape();
    if (x.empty()) fail("expects an input [N, ...], got a scalar");
    if (top[0] != bottom[0]) top[0]->value.reshape(x);
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (phase() == Phase::train && p_ > 0.0f) {
      Tensor y = rows(top[0]->value);
      kernels::stochastic_depth_forward(ctx, rows(bottom[0]->value), y, p_, seed_, step_);
    } else if (top[0] != bottom[0]) {
      ctx.copy(top[0]->value, bottom[0]->value);
    }
  }

  // y = x * m[n] with m[n] = keep[n] / (1 - p) fixed by the forward, so dL/dx = dL/dy * m[n]: the
  // same mask (the current step's) on the gradient. In the test phase (or p = 0) m = 1.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    if (phase() == Phase::train && p_ > 0.0f) {
      Tensor dx = rows(bottom[0]->grad);
      kernels::stochastic_depth_backward(ctx, rows(top[0]->grad), dx, p_, seed_, step_);
    } else if (top[0] != bottom[0]) {
      ctx.copy(bottom[0]->grad, top[0]->grad);
    }
  }

  // Whole samples are scaled: either layout; bf16 and f16 on CUDA too (layers/layer_runs.h).
  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  std::vector<std::pair<std::string, Tensor>> run_state() override { return {{"step", step_}}; }

  // Inference: the identity (rows are dropped and survivors scaled in training only).
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    g.node("Identity", {io.bottom(0)}, {io.top(0)});
  }

 private:
  // The view whose rows are drawn apart: [N, rest] (row), or [1, all] (batch).
  Tensor rows(const Tensor& t) const {
    const int64_t n = batch_ ? 1 : t.dim(0);
    return t.view({n, n == 0 ? 0 : t.numel() / n});
  }

  float p_ = 0.0f;
  bool batch_ = false;
  uint64_t seed_ = 0;
  Tensor step_;  // the training-forward counter: a uint64 in device memory (dropout.h)
};

}  // namespace

void register_stochastic_depth(LayerRegistry& registry) {
  registry.add<StochasticDepthLayer>("StochasticDepth");
}

}  // namespace crema
