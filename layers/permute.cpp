// Permute: reorders the bottom's axes (Caffe-SSD's Permute, torch.permute).
//
//   y[i_0, ..., i_{d-1}] = x[j]  with  j_{order[k]} = i_k;   y.dim(k) = x.dim(order[k])
// order [0, 2, 3, 1] turns NCHW into NHWC, [0, 3, 1, 2] turns it back. As in Caffe-SSD, `order`
// may list only the first axes: the ones it leaves out follow in their own order ([0, 2] on a
// 4-D bottom is [0, 2, 1, 3]). The NCHW <-> NHWC cases, and every order that reduces to a
// transpose of two blocks of axes, run the tiled transpose of kernels/layout; others run a
// general (slower) index walk.
// YAML keys (defaults): order ([]: the identity, a copy).
#include <string>

#include "kernels/layout/layout.h"
#include "layers/graph_forms.h"
#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class PermuteLayer final : public Layer {
 public:
  explicit PermuteLayer(const LayerSpec& spec) : Layer(spec) {
    if (spec.node->has("order")) written_ = spec.node->get_list<int>("order");
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    if (top[0] == bottom[0]) fail("does not run in place; give the top its own name");
    const Shape& x = bottom[0]->value.shape();
    order_ = full_order(int(x.size()));
    inverse_ = kernels::inverse_permutation(order_);
    top[0]->value.reshape(kernels::permuted_shape(x, order_));
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    kernels::permute(ctx, bottom[0]->value, order_, top[0]->value);
  }

  // y moves x's elements without changing them, so dL/dx moves dL/dy's elements back: the
  // permutation by the inverse order.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (propagate_down[0]) kernels::permute(ctx, top[0]->grad, inverse_, bottom[0]->grad);
  }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    g.node("Transpose", {io.bottom(0)}, {io.top(0)}, {{"perm", as_int64(order_)}});
  }

 private:
  // The written order completed with the missing axes in increasing order.
  std::vector<int> full_order(int ndim) const {
    std::vector<bool> used(size_t(ndim), false);
    std::vector<int> order;
    for (int a : written_) {
      if (a < 0 || a >= ndim || used[size_t(a)]) {
        fail_at_key(spec_, "order",
                    std::to_string(a) +
                        (a >= 0 && a < ndim ? " appears twice" : " is not an axis") +
                        "; order lists distinct axes of the " + std::to_string(ndim) +
                        "-D bottom (0 to " + std::to_string(ndim - 1) + ")");
      }
      used[size_t(a)] = true;
      order.push_back(a);
    }
    for (int a = 0; a < ndim; ++a) {
      if (!used[size_t(a)]) order.push_back(a);
    }
    return order;
  }

  std::vector<int> written_;
  std::vector<int> order_, inverse_;  // complete, and its inverse
};

}  // namespace

void register_permute(LayerRegistry& registry) {
  registry.add<PermuteLayer>("Permute");
}

}  // namespace crema
