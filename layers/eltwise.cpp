// Eltwise: combines bottoms of one shape element by element (Caffe's Eltwise; the residual
// connection of ResNets is an Eltwise SUM).
//
//   SUM:   y = c_0 x_0 + c_1 x_1 + ...          (coefficients c_b, default 1; [1, -1] subtracts)
//   PROD:  y = x_0 * x_1 * ...
//   MAX:   y = max_b x_b                         (remembers which bottom won, for backward)
// x_b, y: any shape, all the same. Two or more bottoms. Not in place (PROD and MAX backward read
// the bottoms and the winners).
// YAML keys (defaults): operation (SUM; or PROD, MAX), coeff ([1, 1, ...]; SUM only, one per
// bottom), stable_prod_grad (true; Caffe's key, the only choice here).
#include <string>

#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/eltwise.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class EltwiseLayer final : public Layer {
 public:
  enum class Operation { sum, prod, max };

  explicit EltwiseLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    const std::string op = node.get<std::string>("operation", "SUM");
    if (op == "SUM") {
      op_ = Operation::sum;
    } else if (op == "PROD") {
      op_ = Operation::prod;
    } else if (op == "MAX") {
      op_ = Operation::max;
    } else {
      fail_at_key(spec, "operation", "must be SUM, PROD or MAX, got '" + op + "'");
    }
    if (!node.get<bool>("stable_prod_grad", true)) {
      fail_at_key(spec, "stable_prod_grad",
                  "only the stable product gradient (the product of the other bottoms) is "
                  "implemented; remove the key or set it to true");
    }
    if (node.has("coeff")) {
      if (op_ != Operation::sum) fail_at_key(spec, "coeff", "applies to operation SUM only");
      coeff_ = node.get_list<float>("coeff");
    }
  }

  // Elementwise: either layout; bf16 and f16 on CUDA too (layers/layer_runs.h).
  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 1 << 20; }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>&, Context&) override {
    if (coeff_.empty()) coeff_.assign(bottom.size(), 1.0f);
    if (coeff_.size() != bottom.size()) {
      fail_at_key(spec_, "coeff",
                  std::to_string(coeff_.size()) + " coefficients for " +
                      std::to_string(bottom.size()) + " bottoms; give one per bottom");
    }
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Shape& shape = bottom[0]->value.shape();
    for (size_t b = 0; b < bottom.size(); ++b) {
      if (top[0] == bottom[b]) {
        fail("does not run in place (top '" + spec_.tops[0] + "' is a bottom)");
      }
      if (bottom[b]->value.shape() != shape) {
        fail_at_key(spec_, "bottom",
                    "'" + spec_.bottoms[0] + "' " + shape_str(shape) + " and '" + spec_.bottoms[b] +
                        "' " + shape_str(bottom[b]->value.shape()) +
                        " differ in shape; every bottom of an Eltwise must have the same shape");
      }
    }
    top[0]->value.reshape(shape);
    if (op_ == Operation::max) {
      if (!argmax_.defined()) argmax_ = ctx.empty({0}, bottom[0]->value.dtype());
      argmax_.reshape(shape);
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const std::vector<const Tensor*> x = values(bottom);
    switch (op_) {
      case Operation::sum:
        kernels::eltwise_sum(ctx, x, coeff_, top[0]->value);
        break;
      case Operation::prod:
        kernels::eltwise_prod(ctx, x, top[0]->value);
        break;
      case Operation::max:
        kernels::eltwise_max(ctx, x, top[0]->value, argmax_);
        break;
    }
  }

  // SUM:  dL/dx_b = c_b dL/dy.
  // PROD: dL/dx_b = dL/dy * prod_{j != b} x_j (the product of the others, exact even where an x_j
  //       is zero, rather than y / x_b).
  // MAX:  dL/dx_b = dL/dy where bottom b won (the first of equal maxima), 0 elsewhere.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const Tensor& dy = top[0]->grad;
    const std::vector<const Tensor*> x = values(bottom);
    for (size_t b = 0; b < bottom.size(); ++b) {
      if (!propagate_down[b]) continue;
      Tensor& dx = bottom[b]->grad;
      switch (op_) {
        case Operation::sum:
          kernels::axpby(ctx, coeff_[b], dy, 0.0f, dx);
          break;
        case Operation::prod:
          kernels::eltwise_prod_backward(ctx, x, int(b), dy, dx);
          break;
        case Operation::max:
          kernels::eltwise_max_backward(ctx, dy, argmax_, int(b), dx);
          break;
      }
    }
  }

  // SUM: Sum of the bottoms, each first multiplied by its coefficient where that is not 1;
  // PROD: a chain of Mul; MAX: Max.
  // A sum's backward reads no value, a max its own argmax, a product the bottoms.
  BackwardReads backward_reads() const override { return {op_ == Operation::prod, false}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    std::vector<std::string> inputs;
    for (size_t i = 0; i < io.bottoms.size(); ++i) {
      std::string in = io.bottom(i);
      if (op_ == Operation::sum && !coeff_.empty() && coeff_[i] != 1.0f) {
        const std::string scaled = g.temp(io.top(0) + "/scaled");
        g.node("Mul", {in, g.floats(io.top(0) + "/coeff", {coeff_[i]}, {})}, {scaled});
        in = scaled;
      }
      inputs.push_back(in);
    }
    if (op_ == Operation::prod) {
      std::string product = inputs[0];
      for (size_t i = 1; i < inputs.size(); ++i) {
        const std::string out = i + 1 == inputs.size() ? io.top(0) : g.temp(io.top(0) + "/product");
        g.node("Mul", {product, inputs[i]}, {out});
        product = out;
      }
      return;
    }
    g.node(op_ == Operation::sum ? "Sum" : "Max", inputs, {io.top(0)});
  }

 private:
  static std::vector<const Tensor*> values(const std::vector<Blob*>& blobs) {
    std::vector<const Tensor*> x;
    for (const Blob* b : blobs) x.push_back(&b->value);
    return x;
  }

  Operation op_ = Operation::sum;
  std::vector<float> coeff_;  // one per bottom (SUM)
  Tensor argmax_;             // MAX: the winning bottom's index per element, as a float
};

}  // namespace

void register_eltwise(LayerRegistry& registry) {
  registry.add<EltwiseLayer>("Eltwise");
}

}  // namespace crema
