// Dropout: in training each unit is zeroed with probability dropout_ratio and the kept ones are
// scaled by 1 / (1 - dropout_ratio) ("inverted" dropout, as Caffe and PyTorch), so that in the
// test phase the layer is the identity (Srivastava, Hinton et al. 2014).
//   y = keep ? x / (1 - dropout_ratio) : 0
//
//   x, y: any shape, the same. Runs in place (top == bottom).
// YAML keys (defaults): dropout_ratio (0.5; in [0, 1)).
//
// The mask is drawn by a counter-based hash of (seed, step, element index)
// (kernels/dropout/dropout_hash.h): the CPU and the GPU draw the same masks, and the backward
// recomputes the forward's mask rather than storing it. The seed is drawn from the context's
// generator at setup. The step is a counter in device memory (a member tensor: per-run state, not
// a weight, so it is not a buffer and never lands in a weight file) that every training forward
// advances on the device, so a training step replayed as a CUDA graph still draws a new mask each
// time. A fresh layer with the same seed therefore repeats the same sequence of masks.
#include "kernels/dropout/dropout.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class DropoutLayer final : public Layer {
 public:
  explicit DropoutLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    ratio_ = node.get<float>("dropout_ratio", 0.5f);
    if (!(ratio_ >= 0.0f && ratio_ < 1.0f)) {
      fail_at_key(spec, "dropout_ratio", "must be in [0, 1), got " + std::to_string(ratio_));
    }
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    seed_ = ctx.random().next();
    step_ = kernels::dropout_step_counter(ctx);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    if (top[0] != bottom[0]) top[0]->value.reshape(bottom[0]->value.shape());
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (phase() == Phase::train) {
      kernels::dropout_forward(ctx, bottom[0]->value, top[0]->value, ratio_, seed_, step_);
    } else if (top[0] != bottom[0]) {
      ctx.copy(top[0]->value, bottom[0]->value);
    }
  }

  // y = x * m with m = keep / (1 - ratio) fixed by the forward, so dL/dx = dL/dy * m: the same
  // mask (the current step's) applied to the gradient. In the test phase m = 1.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    if (phase() == Phase::train) {
      kernels::dropout_backward(ctx, top[0]->grad, bottom[0]->grad, ratio_, seed_, step_);
    } else if (top[0] != bottom[0]) {
      ctx.copy(bottom[0]->grad, top[0]->grad);
    }
  }

  // Elementwise: either layout; bf16 and f16 on CUDA too (layers/layer_runs.h).
  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  // The step counter goes into checkpoints (not weight files), so a resumed run draws the
  // masks the uninterrupted run would have drawn.
  std::vector<std::pair<std::string, Tensor>> run_state() override { return {{"step", step_}}; }

  // Inference: the identity (inverted dropout scales in training only).
  // The mask is recomputed from its hash: backward reads no value.
  BackwardReads backward_reads() const override { return {false, false}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    g.node("Identity", {io.bottom(0)}, {io.top(0)});
  }

 private:
  float ratio_;
  uint64_t seed_ = 0;
  Tensor step_;  // the training-forward counter: a uint64 in device memory (dropout.h)
};

}  // namespace

void register_dropout(LayerRegistry& registry) {
  registry.add<DropoutLayer>("Dropout");
}

}  // namespace crema
