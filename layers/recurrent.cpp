// RNN, LSTM and GRU: recurrent layers over sequences with the semantics of PyTorch's nn.RNN,
// nn.LSTM and nn.GRU (their equations, gate order, parameter names and shapes: a crema checkpoint
// loads into the torch module with strict=True). One class; the layer type picks the cell. One
// step of layer l in one direction, with G gate blocks of H rows (kernels/rnn/rnn.h in full):
//   RNN   h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), act = tanh or relu      G = 1
//   LSTM  i, f, g, o = sigm, sigm, tanh, sigm of the blocks of W_ih x_t + b_ih + W_hh h_{t-1} +
//   b_hh
//         c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t)                          G = 4
//   GRU   r, z = sigm of their blocks,  n = tanh(W_in x_t + b_in + r * (W_hn h_{t-1} + b_hn))
//         h_t = (1 - z) * n + z * h_{t-1}                                          G = 3
// Layer l > 0 reads layer l-1's h_t. Bidirectional layers add a pass backwards in time and give
// both directions' h_t side by side (forward first). Elman 1990; Hochreiter & Schmidhuber 1997;
// Cho et al. 2014.
//
// Shapes: T steps, N sequences, C input features, H = num_output, L = num_layers, D = 2 when
// bidirectional, else 1.
//   Bottoms, in this order:
//     x        [T, N, C], or [N, T, C] with batch_first
//     h0, c0   [L*D, N, H] each (c0 for LSTM only), with initial_state: bottom; else zeros
//     lengths  [N] with lengths: true: integral values in [1, T] (PyTorch's packed sequences);
//              sequence n runs steps 0 .. lengths[n]-1 (the reverse direction starts at
//              lengths[n]-1), its later outputs are 0. It gets no gradient.
//   Tops, one per entry of `outputs`, in the order listed there:
//     sequence  y [T, N, D*H] ([N, T, D*H] with batch_first): the last layer's h_t at every step
//     last      [N, D*H]: the last layer's final states, the forward direction's after its last
//               valid step and the reverse direction's after t = 0 (torch's h_n[-2:] side by
//               side): what a classifier reads
//     hidden    h_n [L*D, N, H]: every layer's and direction's final state
//     cell      c_n [L*D, N, H] (LSTM only)
//   Parameters for layer l, direction d (suffix _l<l>, and _reverse for d = 1), C_0 = C,
//   C_l = D*H after: "<name>.weight_ih_l0" [G*H, C_l], "<name>.weight_hh_l0" [G*H, H],
//   "<name>.bias_ih_l0" [G*H], "<name>.bias_hh_l0" [G*H], in PyTorch's order.
//
// YAML keys (defaults): num_output (required, >= 1), num_layers (1), bidirectional (false),
//   batch_first (false), nonlinearity (RNN only: tanh | relu; tanh), bias_term (true),
//   weight_filler and bias_filler (both uniform(-1/sqrt(H), 1/sqrt(H)), PyTorch's init),
//   param (by parameter role: `param: {weight_hh_l0: {lr_mult: 0}}`; lr_mult 0 freezes, no
//   gradient), initial_state (zero | bottom; zero), lengths (false), outputs (a list from
//   sequence, last, hidden, cell; [sequence]). PyTorch's dropout between layers and proj_size
//   are not offered.
// Lengths are checked at every forward on the CPU (the kernel throws). On a GPU they are checked
// on the host at the first forward only (a small copy; that pass runs before a CUDA graph is
// captured); later steps do not look at them and the kernels clamp them into [0, T].
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/concat/concat.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/layout/layout.h"
#include "kernels/rnn/rnn.h"
#include "layers/filler.h"
#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

using kernels::RnnCell;

enum class Output { sequence, last, hidden, cell };
constexpr int kNoBottom = -1;

// y [B, A, X] = x [A, B, X] with its first two axes swapped: time-major <-> batch-first.
void swap_first_two(Context& ctx, const Tensor& x, Tensor& y) {
  kernels::permute(ctx, x, {1, 0, 2}, y);
}

// t = a tensor of `shape` and `dtype` on ctx's device, keeping its storage when it fits.
void ensure_shape(Tensor& t, const Shape& shape, DType dtype, Context& ctx) {
  if (t.defined()) {
    t.reshape(shape);
  } else {
    t = ctx.empty(shape, dtype);
  }
}

class RecurrentLayer final : public Layer {
 public:
  explicit RecurrentLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    g_.cell = read_cell(spec);
    if (!node.has("num_output"))
      fail_missing_key(spec, "num_output", "required: the hidden size H");
    g_.H = node.get<int64_t>("num_output");
    if (g_.H < 1) {
      fail_at_key(spec, "num_output", "must be at least 1, got " + std::to_string(g_.H));
    }
    g_.layers = node.get<int64_t>("num_layers", 1);
    if (g_.layers < 1) {
      fail_at_key(spec, "num_layers", "must be at least 1, got " + std::to_string(g_.layers));
    }
    g_.bidirectional = node.get<bool>("bidirectional", false);
    batch_first_ = node.get<bool>("batch_first", false);
    bias_term_ = node.get<bool>("bias_term", true);
    FillerSpec pytorch_init;
    pytorch_init.type = "uniform";
    pytorch_init.max = 1.0 / std::sqrt(double(g_.H));
    pytorch_init.min = -pytorch_init.max;
    weight_filler_ = read_filler(node, "weight_filler", pytorch_init);
    bias_filler_ = read_filler(node, "bias_filler", pytorch_init);

    const std::string initial = node.get<std::string>("initial_state", "zero");
    if (initial != "zero" && initial != "bottom") {
      fail_at_key(spec, "initial_state", "expected zero or bottom, got '" + initial + "'");
    }
    int next = 1;  // x is bottom 0
    if (initial == "bottom") {
      h0_bottom_ = next++;
      if (g_.cell == RnnCell::lstm) c0_bottom_ = next++;
    }
    if (node.get<bool>("lengths", false)) lengths_bottom_ = next++;
    num_bottoms_ = next;
    read_outputs(spec);
  }

  int min_bottoms() const override { return num_bottoms_; }
  int max_bottoms() const override { return num_bottoms_; }
  int min_tops() const override { return int(outputs_.size()); }
  int max_tops() const override { return int(outputs_.size()); }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>&, Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() != 3) {
      fail("input x " + shape_str(x.shape()) + " must have 3 axes, " + x_letters());
    }
    g_.C = x.dim(2);
    const int64_t G = g_.gates(), H = g_.H;
    auto create = [&](const std::string& role, const Shape& shape, const FillerSpec& filler) {
      const size_t index = add_param(role, shape, ctx);
      fill_tensor(filler, ctx.random(), params_[index].value);
    };
    for (int64_t l = 0; l < g_.layers; ++l) {
      for (int64_t d = 0; d < g_.directions(); ++d) {
        const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
        create("weight_ih" + suffix, {G * H, g_.input_size(l)}, weight_filler_);
        create("weight_hh" + suffix, {G * H, H}, weight_filler_);
        if (bias_term_) {
          create("bias_ih" + suffix, {G * H}, bias_filler_);
          create("bias_hh" + suffix, {G * H}, bias_filler_);
        }
      }
    }
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    dtype_ = x.dtype();
    if (x.ndim() != 3 || x.dim(2) != g_.C) {
      fail("input x " + shape_str(x.shape()) + " must be " + x_letters() +
           " with C = " + std::to_string(g_.C) + " (the features it was set up with)");
    }
    g_.T = x.dim(batch_first_ ? 1 : 0);
    g_.N = x.dim(batch_first_ ? 0 : 1);
    g_.validate(("layer '" + name() + "' (" + type() + ")").c_str());
    const int64_t LD = g_.passes(), N = g_.N, H = g_.H, DH = g_.directions() * H;
    const Shape state{LD, N, H};
    check_bottom(bottom, h0_bottom_, "h0", state);
    check_bottom(bottom, c0_bottom_, "c0", state);
    check_bottom(bottom, lengths_bottom_, "lengths", {N});

    if (batch_first_) ensure_shape(x_, {g_.T, N, g_.C}, dtype_, ctx);
    ensure_shape(y_, {g_.T, N, DH}, dtype_, ctx);
    ensure_shape(reserve_, {int64_t(kernels::rnn_reserve_floats(ctx, g_, x.dtype()))}, dtype_, ctx);
    if (has_output(Output::last) && !has_output(Output::hidden)) {
      ensure_shape(h_n_, state, dtype_, ctx);
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      switch (outputs_[i]) {
        case Output::sequence:
          top[i]->value.reshape(batch_first_ ? Shape{N, g_.T, DH} : Shape{g_.T, N, DH});
          break;
        case Output::last:
          top[i]->value.reshape({N, DH});
          break;
        case Output::hidden:
        case Output::cell:
          top[i]->value.reshape(state);
          break;
      }
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (lengths_bottom_ != kNoBottom && ctx.device().is_cuda() && !lengths_checked_) {
      ctx.synchronize();  // the lengths may still be on their way to the device
      check_lengths_on_host(bottom[size_t(lengths_bottom_)]->value);
      lengths_checked_ = true;
    }
    if (batch_first_) swap_first_two(ctx, bottom[0]->value, x_);
    Tensor& h_n = has_output(Output::hidden) ? top_of(top, Output::hidden)->value : h_n_;
    Tensor& c_n = has_output(Output::cell) ? top_of(top, Output::cell)->value : none_;
    try {
      kernels::rnn_forward(ctx, g_, input(bottom), optional(bottom, lengths_bottom_),
                           optional(bottom, h0_bottom_), optional(bottom, c0_bottom_), weights(),
                           y_, h_n, c_n, reserve_);
    } catch (const DeviceError&) {
      throw;
    } catch (const Error& e) {
      fail(e.what());  // a bad length on the CPU, named by the kernel: say which layer
    }
    // y stays in the layer because the backward reads it and a layer running in place on the
    // sequence top would change it.
    if (Blob* seq = top_of(top, Output::sequence)) {
      if (batch_first_) {
        swap_first_two(ctx, y_, seq->value);
      } else {
        ctx.copy(seq->value, y_);
      }
    }
    if (Blob* last = top_of(top, Output::last)) {
      Tensor last3 = last->value.view({g_.N, g_.directions(), g_.H});
      swap_first_two(ctx, final_states(h_n, ctx), last3);
    }
  }

  // Backpropagation through time (in the kernel): the gradient reaching h_t comes from the
  // sequence top at step t and from step t+1 (and, through the layer above, from its input);
  // the final states' gradients (hidden, and `last`, which is the top layer's final states
  // rearranged) enter at each pass's last step. Weight gradients add up over every step and
  // accumulate (+=) into the parameters'. lengths is piecewise constant: its gradient is 0.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    Tensor dy;
    if (Blob* seq = top_of(top, Output::sequence)) {
      if (batch_first_) {
        ensure_shape(dy_, y_.shape(), dtype_, ctx);
        swap_first_two(ctx, seq->grad, dy_);
        dy = dy_;
      } else {
        dy = seq->grad;
      }
    }
    const Tensor d_h_n = final_state_grad(top, ctx);
    const Tensor d_c_n = has_output(Output::cell) ? top_of(top, Output::cell)->grad : Tensor();
    Tensor dx, dh0, dc0;
    if (propagate_down[0]) {
      if (batch_first_) ensure_shape(dx_, x_.shape(), dtype_, ctx);
      dx = batch_first_ ? dx_ : bottom[0]->grad;
    }
    if (h0_bottom_ != kNoBottom && propagate_down[size_t(h0_bottom_)]) {
      dh0 = bottom[size_t(h0_bottom_)]->grad;
    }
    if (c0_bottom_ != kNoBottom && propagate_down[size_t(c0_bottom_)]) {
      dc0 = bottom[size_t(c0_bottom_)]->grad;
    }
    kernels::rnn_backward(ctx, g_, input(bottom), optional(bottom, lengths_bottom_),
                          optional(bottom, h0_bottom_), optional(bottom, c0_bottom_), weights(), y_,
                          reserve_, dy, d_h_n, d_c_n, dx, dh0, dc0, weight_grads());
    if (propagate_down[0] && batch_first_) {
      swap_first_two(ctx, dx_, bottom[0]->grad);
    }
    if (lengths_bottom_ != kNoBottom && propagate_down[size_t(lengths_bottom_)]) {
      ctx.fill(bottom[size_t(lengths_bottom_)]->grad, 0.0f);
    }
  }

  // Per pass, per step, the two projections: G*H rows of C_l + H weights for each of N
  // sequences (cuDNN's count, FLOPs / 2; the gate arithmetic is left out).
  int64_t multiply_adds(const std::vector<Blob*>& bottom,
                        const std::vector<Blob*>&) const override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() != 3) return 0;
    int64_t per_step = 0;
    for (int64_t l = 0; l < g_.layers; ++l) {
      per_step += g_.directions() * g_.gates() * g_.H * (g_.input_size(l) + g_.H);
    }
    return x.dim(0) * x.dim(1) * per_step;
  }

 private:
  static RnnCell read_cell(const LayerSpec& spec) {
    if (spec.type == "LSTM") return RnnCell::lstm;
    if (spec.type == "GRU") return RnnCell::gru;
    const std::string act = spec.node->get<std::string>("nonlinearity", "tanh");
    if (act == "tanh") return RnnCell::rnn_tanh;
    if (act == "relu") return RnnCell::rnn_relu;
    fail_at_key(spec, "nonlinearity", "expected tanh or relu, got '" + act + "'");
  }

  void read_outputs(const LayerSpec& spec) {
    if (!spec.node->has("outputs")) {
      outputs_ = {Output::sequence};
      return;
    }
    const char* names[] = {"sequence", "last", "hidden", "cell"};
    for (const std::string& written : spec.node->get_list<std::string>("outputs")) {
      int found = -1;
      for (int k = 0; k < 4; ++k) found = written == names[k] ? k : found;
      if (found < 0) {
        fail_at_key(spec, "outputs",
                    "unknown output '" + written + "' (known: sequence, last, hidden, cell)");
      }
      const Output o = Output(found);
      if (o == Output::cell && g_.cell != RnnCell::lstm) {
        fail_at_key(spec, "outputs", "'cell' is the LSTM's cell state; " + spec.type + " has none");
      }
      if (has_output(o)) fail_at_key(spec, "outputs", "'" + written + "' is listed twice");
      outputs_.push_back(o);
    }
    if (outputs_.empty()) fail_at_key(spec, "outputs", "list at least one output");
  }

  std::string x_letters() const { return batch_first_ ? "[N, T, C] (batch_first)" : "[T, N, C]"; }

  void check_bottom(const std::vector<Blob*>& bottom, int index, const char* what,
                    const Shape& shape) const {
    if (index == kNoBottom || bottom[size_t(index)]->value.shape() == shape) return;
    fail(std::string(what) + " (bottom '" + spec_.bottoms[size_t(index)] + "') is " +
         shape_str(bottom[size_t(index)]->value.shape()) + ", expected " +
         (shape.size() == 1 ? "[N] = " : "[L*D, N, H] = ") + shape_str(shape));
  }

  void check_lengths_on_host(const Tensor& lengths) const {
    const std::vector<float> values = lengths.to_vector();
    for (size_t n = 0; n < values.size(); ++n) {
      const float v = values[n];
      if (!(v >= 1.0f && v <= float(g_.T) && v == std::floor(v))) {
        std::ostringstream value;
        value << v;
        fail("lengths (bottom '" + spec_.bottoms[size_t(lengths_bottom_)] + "')[" +
             std::to_string(n) + "] is " + value.str() +
             ", expected an integer in [1, T = " + std::to_string(g_.T) + "]");
      }
    }
  }

  bool has_output(Output o) const {
    return std::find(outputs_.begin(), outputs_.end(), o) != outputs_.end();
  }
  Blob* top_of(const std::vector<Blob*>& top, Output o) const {
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (outputs_[i] == o) return top[i];
    }
    return nullptr;
  }
  const Tensor& input(const std::vector<Blob*>& bottom) const {
    return batch_first_ ? x_ : bottom[0]->value;
  }
  const Tensor& optional(const std::vector<Blob*>& bottom, int index) const {
    return index == kNoBottom ? none_ : bottom[size_t(index)]->value;
  }

  // The last layer's final states h_n[(L-1)*D + d], d < D, as [D, N, H].
  Tensor final_states(const Tensor& h_n, Context& ctx) {
    const int64_t D = g_.directions(), NH = g_.N * g_.H;
    if (g_.layers == 1) return h_n;
    ensure_shape(tail_, {D, NH}, dtype_, ctx);
    std::vector<Tensor*> parts = {nullptr, &tail_};
    kernels::slice(ctx, h_n.view({g_.passes(), NH}), 0, {g_.passes() - D, D}, parts);
    return tail_.view({D, g_.N, g_.H});
  }

  // dL/dh_n: the hidden top's gradient, plus the `last` top's put back at the last layer's
  // places (zero for the layers below); undefined when neither is an output.
  Tensor final_state_grad(const std::vector<Blob*>& top, Context& ctx) {
    Blob* hidden = top_of(top, Output::hidden);
    Blob* last = top_of(top, Output::last);
    if (last == nullptr) return hidden != nullptr ? hidden->grad : Tensor();
    const int64_t D = g_.directions(), N = g_.N, H = g_.H, below = g_.passes() - D;
    ensure_shape(d_h_n_, {g_.passes(), N, H}, dtype_, ctx);
    const Tensor d_last = last->grad.view({N, D, H});
    if (below == 0) {
      swap_first_two(ctx, d_last, d_h_n_);
    } else {
      ensure_shape(tail_, {D, N, H}, dtype_, ctx);
      swap_first_two(ctx, d_last, tail_);
      ensure_shape(zeros_below_, {below, N * H}, dtype_, ctx);
      ctx.fill(zeros_below_, 0.0f);
      const Tensor tail2 = tail_.view({D, N * H});
      Tensor whole = d_h_n_.view({g_.passes(), N * H});
      kernels::concat(ctx, {&zeros_below_, &tail2}, 0, whole);
    }
    if (hidden != nullptr) kernels::axpy(ctx, 1.0f, hidden->grad, d_h_n_);
    return d_h_n_;
  }

  // Parameters per pass p = l*D + d: weight_ih, weight_hh[, bias_ih, bias_hh].
  size_t per_pass() const { return bias_term_ ? 4 : 2; }
  kernels::RnnParams weights() const {
    kernels::RnnParams w;
    for (size_t i = 0; i < params_.size(); i += per_pass()) {
      w.w_ih.push_back(&params_[i].value);
      w.w_hh.push_back(&params_[i + 1].value);
      w.b_ih.push_back(bias_term_ ? &params_[i + 2].value : nullptr);
      w.b_hh.push_back(bias_term_ ? &params_[i + 3].value : nullptr);
    }
    return w;
  }
  // Null for frozen parameters: no gradient is computed for them.
  kernels::RnnParamGrads weight_grads() {
    auto grad = [this](size_t i) { return params_[i].frozen() ? nullptr : &params_[i].grad; };
    kernels::RnnParamGrads dw;
    for (size_t i = 0; i < params_.size(); i += per_pass()) {
      dw.w_ih.push_back(grad(i));
      dw.w_hh.push_back(grad(i + 1));
      dw.b_ih.push_back(bias_term_ ? grad(i + 2) : nullptr);
      dw.b_hh.push_back(bias_term_ ? grad(i + 3) : nullptr);
    }
    return dw;
  }

  kernels::RnnGeometry g_;  // T, N and C follow the bottom at each reshape
  bool batch_first_, bias_term_;
  DType dtype_ = DType::f32;  // x's: the dtype of every tensor below (float64 in gradient checks)
  FillerSpec weight_filler_, bias_filler_;
  int h0_bottom_ = kNoBottom, c0_bottom_ = kNoBottom, lengths_bottom_ = kNoBottom;
  int num_bottoms_ = 1;
  std::vector<Output> outputs_;
  bool lengths_checked_ = false;  // on a GPU, at the first forward

  Tensor x_;            // [T, N, C]: x time-major (batch_first only)
  Tensor y_;            // [T, N, D*H]: the last layer's h_t, read by the backward
  Tensor h_n_;          // [L*D, N, H]: the final states when `last` is an output but not `hidden`
  Tensor reserve_;      // what the training forward saves for the backward (kernels/rnn)
  Tensor dy_, dx_;      // [T, N, D*H], [T, N, C]: time-major gradients (batch_first only)
  Tensor tail_;         // [D, N, H]: the last layer's final states or their gradient
  Tensor zeros_below_;  // [(L-1)*D, N*H]: dL/dh_n of the layers below the last, from `last`
  Tensor d_h_n_;        // [L*D, N, H]: dL/dh_n when `last` is an output
  Tensor none_;         // undefined: "absent" for the kernels
};

}  // namespace

void register_recurrent(LayerRegistry& registry) {
  registry.add<RecurrentLayer>("RNN");
  registry.add<RecurrentLayer>("LSTM");
  registry.add<RecurrentLayer>("GRU");
}

}  // namespace crema
