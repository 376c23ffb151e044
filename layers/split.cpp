// Split: hands one blob to several consumers. The Net inserts it wherever a blob feeds more than
// one layer; users never write it.
//
//   forward:  every top shares the bottom's values (no copy)
//   backward: dL/dx = sum over tops of dL/dtop (each consumer's gradient, written separately)
#include "kernels/elementwise/elementwise.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class SplitLayer final : public Layer {
 public:
  explicit SplitLayer(const LayerSpec& spec) : Layer(spec) {}

  int max_tops() const override { return 1 << 20; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    for (Blob* t : top) t->value = bottom[0]->value;
  }

  void forward(const std::vector<Blob*>&, const std::vector<Blob*>&, Context&) override {}

  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    Tensor& dx = bottom[0]->grad;
    kernels::add(ctx, top[0]->grad, top[1]->grad, dx);
    for (size_t i = 2; i < top.size(); ++i) kernels::axpy(ctx, 1.0f, top[i]->grad, dx);
  }

  // Elementwise: either layout; bf16 and f16 on CUDA too (layers/layer_runs.h).
  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  BackwardReads backward_reads() const override { return {false, false}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    for (const GraphValue& t : io.tops) g.node("Identity", {io.bottom(0)}, {t.name});
  }
};

}  // namespace

void register_split(LayerRegistry& registry) {
  registry.add<SplitLayer>("Split");
}

}  // namespace crema
