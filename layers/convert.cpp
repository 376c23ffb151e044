// Convert: the same values in another dtype or layout. The Net inserts it where model.precision
// or model.layout (core/net_precision.h) store a blob otherwise than the next layer runs it --
// the f32 NCHW images before a bf16 channels-last convolution, the bf16 features before an f32
// classifier -- as autocast casts at an op's boundary; users never write it.
//
//   forward:  y = x in y's dtype and layout (kernels::convert: rounded to nearest even when
//             narrowing; nchw <-> nhwc a transpose of each image)
//   backward: dL/dx = dL/dy in x's dtype and layout (the map is the identity on values, so its
//             gradient is too, up to the same rounding)
// Shapes: any; the Net creates y in the format wanted before setup.
#include "kernels/layout/layout.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class ConvertLayer final : public Layer {
 public:
  explicit ConvertLayer(const LayerSpec& spec) : Layer(spec) {
    if (spec.node != nullptr) {
      fail(
          "the Net inserts Convert where model.precision or model.layout change how a blob is "
          "stored; a config does not name it (give a layer its own `precision:` instead)");
    }
  }

  bool runs(DType, Layout, const Device&) const override { return true; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    top[0]->value.reshape(bottom[0]->value.shape());
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    kernels::convert(ctx, bottom[0]->value, top[0]->value);
  }

  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (propagate_down[0]) kernels::convert(ctx, top[0]->grad, bottom[0]->grad);
  }
  BackwardReads backward_reads() const override { return {false, false}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    g.node("Identity", {io.bottom(0)}, {io.tops[0].name});
  }
};

}  // namespace

void register_convert(LayerRegistry& registry) {
  registry.add<ConvertLayer>("Convert");
}

}  // namespace crema
