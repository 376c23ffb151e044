// Permute: reorders the bottom's axes (Caffe-SSD's Permute, torch.permute).
//
//   y[i_0, ..., i_{d-1}] = x[j]  with  j_{order[k]} = i_k;   y.dim(k) = x.dim(order[k])
// order [0, 2, 3, 1] turns NCHW into NHWC, [0, 3, 1, 2] turns it back. As in Caffe-SSD, `order`
// may list only the first axes: the ones it leaves out follow in their own order ([0, 2] on a
// 4-D bottom is [0, 2, 1, 3]). The NCHW <-> NHWC cases, and every order that reduces to a
// transpose of two blocks of axes, run the tiled transpose of kernels/layout; others run a
// general (slower) index walk.
//
// Channels-last views: a 4-D bottom stored nhwc already holds its bytes in the order
// [N, H, W, C], so order [0, 2, 3, 1] on it is a view (no copy either way): the top is the same
// storage as a plainly contiguous [N, H, W, C] (layout nchw). Back again, order [0, 3, 1, 2] on a
// bf16 or f16 [N, H, W, C] (stored nchw: the only 4-D layout a 16-bit net gives it) is the view
// [N, C, H, W] stored nhwc. So ConvNeXt's block under model.layout nhwc permutes for free, in
// every dtype the net runs (runs() says which orders view which layouts). An f32 [N, H, W, C]
// permuted back is still copied into nchw, as an fp32 nchw net wants it.
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

  // f32 and f64 nchw through kernels::permute; the channels-last views in any dtype.
  bool runs(DType dtype, Layout layout, const Device& device) const override {
    const bool floats = dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
    if (layout == Layout::nhwc) return floats && written_ == kToChannelsLast;
    if (dtype != DType::f32 && dtype != DType::f64 && written_ == kFromChannelsLast) return floats;
    return Layer::runs(dtype, layout, device);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    if (top[0] == bottom[0]) fail("does not run in place; give the top its own name");
    const Tensor& x = bottom[0]->value;
    order_ = full_order(x.ndim());
    inverse_ = kernels::inverse_permutation(order_);
    const Shape y_shape = kernels::permuted_shape(x.shape(), order_);
    view_ = x.ndim() == 4 && ((x.layout() == Layout::nhwc && order_ == kToChannelsLast) ||
                              (x.layout() == Layout::nchw && x.dtype() != DType::f32 &&
                               x.dtype() != DType::f64 && order_ == kFromChannelsLast));
    if (!view_ &&
        (x.layout() == Layout::nhwc || (x.dtype() != DType::f32 && x.dtype() != DType::f64))) {
      fail("permutes " + x.description() +
           " only as a view: order [0, 2, 3, 1] of a tensor "
           "stored nhwc, or [0, 3, 1, 2] of a 16-bit one stored nchw; order " +
           shape_str(Shape(order_.begin(), order_.end())) +
           " needs f32 nchw (give the layer "
           "`precision: fp32`)");
    }
    if (!view_) {
      top[0]->value.reshape(y_shape);
      return;
    }
    // The same bytes under the other axis order: the top's layout is the bottom's other one.
    const Layout y_layout = x.layout() == Layout::nhwc ? Layout::nchw : Layout::nhwc;
    top[0]->value = x.view(y_shape);
    top[0]->value.set_layout(y_layout);
    top[0]->grad.set_layout(y_layout);
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (!view_) kernels::permute(ctx, bottom[0]->value, order_, top[0]->value);
  }

  // y moves x's elements without changing them, so dL/dx moves dL/dy's elements back: the
  // permutation by the inverse order. A view's dL/dx is dL/dy's storage under x's shape and
  // layout (pointed at here, after the Net has sized the gradients, as Flatten does).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    if (view_) {
      bottom[0]->grad = top[0]->grad.view(bottom[0]->value.shape());
      bottom[0]->grad.set_layout(bottom[0]->value.layout());
    } else {
      kernels::permute(ctx, top[0]->grad, inverse_, bottom[0]->grad);
    }
  }
  BackwardReads backward_reads() const override { return {false, false}; }
  bool gradient_is_view() const override { return view_; }

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

  // NCHW -> NHWC and back, as written in ConvNeXt's blocks.
  static inline const std::vector<int> kToChannelsLast{0, 2, 3, 1}, kFromChannelsLast{0, 3, 1, 2};

  std::vector<int> written_;
  std::vector<int> order_, inverse_;  // complete, and its inverse
  bool view_ = false;                 // the top shares the bottom's storage (header)
};

}  // namespace

void register_permute(LayerRegistry& registry) {
  registry.add<PermuteLayer>("Permute");
}

}  // namespace crema
