// ReLU: y = max(x, 0) + negative_slope * min(x, 0)   (leaky when negative_slope > 0).
//
//   x, y: any shape, the same. Runs in place when top == bottom.
// YAML keys (defaults): negative_slope (0).
// Nair & Hinton 2010; the leaky form from Maas et al. 2013.
#include "kernels/activations/relu.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class ReLULayer final : public Layer {
 public:
  explicit ReLULayer(const LayerSpec& spec) : Layer(spec) {
    negative_slope_ = spec.node->get<float>("negative_slope", 0.0f);
    if (negative_slope_ < 0.0f)
      spec.node->at("negative_slope").fail("negative_slope must not be negative");
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    if (top[0] != bottom[0]) top[0]->value.reshape(bottom[0]->value.shape());
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    kernels::relu_forward(ctx, bottom[0]->value, top[0]->value, negative_slope_);
  }

  // dL/dx = dL/dy where y > 0, negative_slope * dL/dy elsewhere. Read from y, not x, so the
  // in-place form (x overwritten by y) works: y > 0 exactly where x > 0.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    kernels::relu_backward(ctx, top[0]->value, top[0]->grad, bottom[0]->grad, negative_slope_);
  }

  // Elementwise: either layout; bf16 and f16 on CUDA too (layers/layer_runs.h).
  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  // Backward reads y alone: y > 0 exactly where x > 0.
  BackwardReads backward_reads() const override { return {false, true}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    if (negative_slope_ == 0.0f) {
      g.node("Relu", {io.bottom(0)}, {io.top(0)});
    } else {
      g.node("LeakyRelu", {io.bottom(0)}, {io.top(0)}, {{"alpha", negative_slope_}});
    }
  }

 private:
  float negative_slope_;
};

}  // namespace

void register_relu(LayerRegistry& registry) {
  registry.add<ReLULayer>("ReLU");
}

}  // namespace crema
