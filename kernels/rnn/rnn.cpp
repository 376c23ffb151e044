// Recurrent networks: the geometry, and the one dispatch point. Checks every tensor once (dtype,
// device, shape; on the CPU also the values of `lengths`), then runs:
//   float64 (CPU)  ref::  the reference, for gradient checks (no reserve: its backward recomputes)
//   float32 CPU    cpu::  the fast path, scratch from ctx.workspace()
//   float32 CUDA   cuda:: RnnVersion::best on the context's stream, scratch from ctx.workspace();
//                  lengths stay on the device (no host copy), so their values are not checked
//                  here: the kernels clamp them into [0, T]
#include "kernels/rnn/rnn.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>
#include <string>

#include "core/build_config.h"
#include "core/error.h"
#include "kernels/common/dispatch.h"

namespace crema::kernels {
namespace {

void check_positive(const char* where, const char* name, int64_t value) {
  if (value <= 0) {
    throw Error(std::string(where) + ": " + name + " must be positive, got " +
                std::to_string(value));
  }
}

std::string described(const Tensor* t) {
  return t && t->defined() ? t->description() : "undefined";
}

// PyTorch's name of a pass's parameter: weight_ih_l1_reverse for ("weight_ih", p = 3, D = 2).
std::string param_name(const char* stem, const RnnGeometry& g, size_t p) {
  const int64_t D = g.directions();
  return std::string(stem) + "_l" + std::to_string(int64_t(p) / D) +
         (int64_t(p) % D == 1 ? "_reverse" : "");
}

// The checks of one call: every tensor of the call's dtype, on the context's device.
class Checks {
 public:
  Checks(const Context& ctx, const std::string& op, const RnnGeometry& g, const Tensor& x)
      : ctx_(ctx), op_(op), g_(g) {
    g.validate(op.c_str());
    if (!x.defined()) throw Error(op + ": x is undefined");
    dtype_ = x.dtype();
    if (dtype_ == DType::f64 && !ctx.device().is_cpu()) {
      throw Error(op + ": x is " + x.description() +
                  "; float64 runs on the CPU only (the reference, for gradient checks)");
    }
  }

  DType dtype() const { return dtype_; }
  const std::string& op() const { return op_; }

  void required(const std::string& name, const Tensor* t, const Shape& shape) const {
    if (!t || !t->defined() || t->dtype() != dtype_ || t->device() != ctx_.device() ||
        t->shape() != shape) {
      throw Error(op_ + ": " + name + " is " + described(t) + ", expected " + dtype_name(dtype_) +
                  shape_str(shape) + " on " + ctx_.device().str());
    }
  }
  void optional(const std::string& name, const Tensor* t, const Shape& shape) const {
    if (t && t->defined()) required(name, t, shape);
  }
  // h0, hT, dh0, dhT: [L*D, N, H].
  void state(const std::string& name, const Tensor& t) const {
    optional(name, &t, {g_.passes(), g_.N, g_.H});
  }
  // c0, cT, dc0, dcT: as a state for LSTM; other cells have no cell state.
  void cell_state(const std::string& name, const Tensor& t) const {
    if (g_.cell != RnnCell::lstm && t.defined()) {
      throw Error(op_ + ": " + name + " is " + t.description() + " but a " +
                  rnn_cell_name(g_.cell) + " has no cell state; leave it undefined");
    }
    state(name, t);
  }
  // One list of per-pass parameters (or gradients): one entry per pass, or none when
  // `may_be_empty`.
  template <class Ptr>
  void params(const char* stem, const std::vector<Ptr>& list, bool may_be_empty, bool bias,
              bool entries_may_be_null) const {
    const size_t P = size_t(g_.passes());
    if (list.size() != P && !(may_be_empty && list.empty())) {
      throw Error(op_ + ": " + std::to_string(list.size()) + " " + stem + " tensors for " +
                  std::to_string(P) + " passes (" + std::to_string(g_.layers) + " layers x " +
                  std::to_string(g_.directions()) + " directions)");
    }
    const int64_t GH = g_.gates() * g_.H;
    for (size_t p = 0; p < list.size(); ++p) {
      const int64_t l = int64_t(p) / g_.directions();
      const Shape shape =
          bias ? Shape{GH}
               : Shape{GH, std::string(stem).find("_ih") != std::string::npos ? g_.input_size(l)
                                                                              : g_.H};
      if (entries_may_be_null) {
        optional(param_name(stem, g_, p), list[p], shape);
      } else {
        required(param_name(stem, g_, p), list[p], shape);
      }
    }
  }
  void reserve(const Tensor& t, size_t floats) const {
    if (!t.defined() || t.dtype() != DType::f32 || t.device() != ctx_.device() ||
        size_t(t.numel()) < floats) {
      throw Error(op_ + ": reserve is " + described(&t) + ", expected at least " +
                  std::to_string(floats) + " f32 values on " + ctx_.device().str() +
                  " (rnn_reserve_floats)");
    }
  }

 private:
  const Context& ctx_;
  std::string op_;
  const RnnGeometry& g_;
  DType dtype_ = DType::f32;
};

std::string number_str(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// lengths[n] must be integral and in [1, T] (host memory: the CPU paths).
template <class T>
void check_length_values(const std::string& op, const RnnGeometry& g, const Tensor& lengths) {
  const T* v = lengths.data<T>();
  for (int64_t n = 0; n < g.N; ++n) {
    const double len = double(v[n]);
    if (!(len >= 1.0 && len <= double(g.T) && std::floor(len) == len)) {
      throw Error(op + ": lengths[" + std::to_string(n) + "] is " + number_str(len) +
                  ", expected an integer number of steps in [1, " + std::to_string(g.T) + "]");
    }
  }
}

// The inputs both directions of the call share: x, lengths, h0, c0 and the weights.
void check_inputs(const Checks& c, const Context& ctx, const RnnGeometry& g, const Tensor& x,
                  const Tensor& lengths, const Tensor& h0, const Tensor& c0, const RnnParams& w) {
  c.required("x", &x, {g.T, g.N, g.C});
  c.optional("lengths", &lengths, {g.N});
  c.state("h0", h0);
  c.cell_state("c0", c0);
  c.params("weight_ih", w.w_ih, false, false, false);
  c.params("weight_hh", w.w_hh, false, false, false);
  c.params("bias_ih", w.b_ih, true, true, true);
  c.params("bias_hh", w.b_hh, true, true, true);
  if (lengths.defined() && ctx.device().is_cpu()) {
    if (c.dtype() == DType::f64) {
      check_length_values<double>(c.op(), g, lengths);
    } else {
      check_length_values<float>(c.op(), g, lengths);
    }
  }
  // The CUDA kernels index a layer's [T*N, max(G*H, C_l)] buffers with 32-bit integers.
  const int64_t widest = std::max({g.gates() * g.H, g.C, g.directions() * g.H});
  if (ctx.device().is_cuda() && g.T * g.N * widest > INT_MAX) {
    throw Error(c.op() + ": T*N*max(G*H, C, D*H) = " + std::to_string(g.T * g.N * widest) +
                " is more than the CUDA kernels index (2^31 - 1)");
  }
}

Shape y_shape(const RnnGeometry& g) {
  return {g.T, g.N, g.directions() * g.H};
}

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* mut(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <class T>
RnnWeights<T> raw_weights(const RnnGeometry& g, const RnnParams& w) {
  RnnWeights<T> r;
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    r.w_ih.push_back(w.w_ih[p]->data<T>());
    r.w_hh.push_back(w.w_hh[p]->data<T>());
    r.b_ih.push_back(w.b_ih.empty() || !w.b_ih[p] ? nullptr : w.b_ih[p]->data<T>());
    r.b_hh.push_back(w.b_hh.empty() || !w.b_hh[p] ? nullptr : w.b_hh[p]->data<T>());
  }
  return r;
}

template <class T>
RnnWeightGrads<T> raw_grads(const RnnGeometry& g, const RnnParamGrads& dw) {
  auto entry = [](const std::vector<Tensor*>& v, size_t p) -> T* {
    return v.empty() || !v[p] || !v[p]->defined() ? nullptr : v[p]->data<T>();
  };
  RnnWeightGrads<T> r;
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    r.w_ih.push_back(entry(dw.w_ih, p));
    r.w_hh.push_back(entry(dw.w_hh, p));
    r.b_ih.push_back(entry(dw.b_ih, p));
    r.b_hh.push_back(entry(dw.b_hh, p));
  }
  return r;
}

}  // namespace

int64_t RnnGeometry::gates() const {
  switch (cell) {
    case RnnCell::lstm:
      return 4;
    case RnnCell::gru:
      return 3;
    case RnnCell::rnn_tanh:
    case RnnCell::rnn_relu:
      break;
  }
  return 1;
}

int64_t RnnGeometry::input_size(int64_t layer) const {
  return layer == 0 ? C : directions() * H;
}

void RnnGeometry::validate(const char* where) const {
  check_positive(where, "the number of steps T", T);
  check_positive(where, "the number of sequences N", N);
  check_positive(where, "the input size C", C);
  check_positive(where, "the hidden size H", H);
  check_positive(where, "the number of layers", layers);
}

const char* rnn_cell_name(RnnCell cell) {
  switch (cell) {
    case RnnCell::rnn_tanh:
      return "rnn_tanh";
    case RnnCell::rnn_relu:
      return "rnn_relu";
    case RnnCell::lstm:
      return "lstm";
    case RnnCell::gru:
      return "gru";
  }
  return "unknown";
}

size_t rnn_reserve_floats(const Context& ctx, const RnnGeometry& g, DType dtype) {
  if (dtype == DType::f64) return 0;  // the reference keeps nothing between the passes
  // A discarded branch needs no definition of what it calls: a build without CUDA links.
  if constexpr (kBuiltWithCuda) {
    if (ctx.device().is_cuda()) return cuda::rnn_reserve_floats(g);
  }
  return cpu::rnn_reserve_floats(g);
}

void rnn_forward(Context& ctx, const RnnGeometry& g, const Tensor& x, const Tensor& lengths,
                 const Tensor& h0, const Tensor& c0, const RnnParams& w, Tensor& y, Tensor& hT,
                 Tensor& cT, Tensor& reserve) {
  const Checks c(ctx, "rnn_forward", g, x);
  check_inputs(c, ctx, g, x, lengths, h0, c0, w);
  c.required("y", &y, y_shape(g));
  c.state("hT", hT);
  c.cell_state("cT", cT);
  if (c.dtype() == DType::f32) c.reserve(reserve, rnn_reserve_floats(ctx, g, DType::f32));
  dispatch(ctx, "rnn_forward", c.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::rnn_forward(g, x.data<float>(), ptr<float>(lengths), ptr<float>(h0),
                                       ptr<float>(c0), raw_weights<float>(g, w), y.data<float>(),
                                       mut<float>(hT), mut<float>(cT), reserve.data<float>(),
                                       ctx.workspace(cuda::rnn_workspace_floats(g)), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::rnn_forward(g, x.data<float>(), ptr<float>(lengths), ptr<float>(h0),
                                     ptr<float>(c0), raw_weights<float>(g, w), y.data<float>(),
                                     mut<float>(hT), mut<float>(cT), reserve.data<float>(),
                                     ctx.workspace(cpu::rnn_workspace_floats(g)),
                                     ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::rnn_forward(g, x.data<double>(), ptr<double>(lengths), ptr<double>(h0),
                              ptr<double>(c0), raw_weights<double>(g, w), y.data<double>(),
                              mut<double>(hT), mut<double>(cT));
           }));
}

void rnn_backward(Context& ctx, const RnnGeometry& g, const Tensor& x, const Tensor& lengths,
                  const Tensor& h0, const Tensor& c0, const RnnParams& w, const Tensor& y,
                  const Tensor& reserve, const Tensor& dy, const Tensor& dhT, const Tensor& dcT,
                  Tensor& dx, Tensor& dh0, Tensor& dc0, const RnnParamGrads& dw) {
  const Checks c(ctx, "rnn_backward", g, x);
  check_inputs(c, ctx, g, x, lengths, h0, c0, w);
  c.optional("dy", &dy, y_shape(g));
  c.state("dhT", dhT);
  c.cell_state("dcT", dcT);
  c.optional("dx", &dx, {g.T, g.N, g.C});
  c.state("dh0", dh0);
  c.cell_state("dc0", dc0);
  c.params("grad of weight_ih", dw.w_ih, true, false, true);
  c.params("grad of weight_hh", dw.w_hh, true, false, true);
  c.params("grad of bias_ih", dw.b_ih, true, true, true);
  c.params("grad of bias_hh", dw.b_hh, true, true, true);
  if (c.dtype() == DType::f64) {
    c.optional("y", &y, y_shape(g));  // the reference recomputes the forward
  } else {
    c.required("y", &y, y_shape(g));
    c.reserve(reserve, rnn_reserve_floats(ctx, g, DType::f32));
  }
  dispatch(ctx, "rnn_backward", c.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::rnn_backward(g, x.data<float>(), ptr<float>(lengths), ptr<float>(h0),
                                        ptr<float>(c0), raw_weights<float>(g, w), y.data<float>(),
                                        reserve.data<float>(), ptr<float>(dy), ptr<float>(dhT),
                                        ptr<float>(dcT), mut<float>(dx), mut<float>(dh0),
                                        mut<float>(dc0), raw_grads<float>(g, dw),
                                        ctx.workspace(cuda::rnn_workspace_floats(g)), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::rnn_backward(
                        g, x.data<float>(), ptr<float>(lengths), ptr<float>(h0), ptr<float>(c0),
                        raw_weights<float>(g, w), y.data<float>(), reserve.data<float>(),
                        ptr<float>(dy), ptr<float>(dhT), ptr<float>(dcT), mut<float>(dx),
                        mut<float>(dh0), mut<float>(dc0), raw_grads<float>(g, dw),
                        ctx.workspace(cpu::rnn_workspace_floats(g)), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::rnn_backward(g, x.data<double>(), ptr<double>(lengths), ptr<double>(h0),
                               ptr<double>(c0), raw_weights<double>(g, w), ptr<double>(dy),
                               ptr<double>(dhT), ptr<double>(dcT), mut<double>(dx),
                               mut<double>(dh0), mut<double>(dc0), raw_grads<double>(g, dw));
           }));
}

}  // namespace crema::kernels
