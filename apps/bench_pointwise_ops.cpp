// crema bench activation | eltwise | dropout | concat: the elementwise ops through their
// Tensor-level calls (what the layers run), checked against ref<double> on the same exact inputs,
// then timed one pass at a time. bf16 storage for --math bf16, f32 otherwise; the tensors are
// flat arrays to these ops, so --layout changes nothing. The %peak column is of the copy
// bandwidth, measured first. T below is one tensor's bytes.
//
//   activation  relu, sigmoid, tanh, silu, gelu (erf) and gelu (tanh) on x [N, C, H, W]: forward
//               x -> y (2T); backward saved, dy -> dx (3T), saved the y or x the kind's backward
//               reads (kernels/activations/pointwise.h).
//   eltwise     out = a + b (3T), and the in-place a += b (3T).
//   dropout     p 0.5: forward x -> y (2T), backward dy -> dx (2T); the mask is hashed, not read.
//   concat      two [N, C, H, W] parts along C into [N, 2C, H, W] (read 2 parts, write the whole:
//               2 * 2T), and its backward, the slice of the whole into the parts (the same bytes).
//
// PyTorch's peer on the same shapes: scripts/bench/peer_memory_bound.py.
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "apps/bench_memory_bound.h"
#include "core/random.h"
#include "kernels/activations/pointwise.h"
#include "kernels/activations/relu.h"
#include "kernels/concat/concat.h"
#include "kernels/dropout/dropout.h"
#include "kernels/elementwise/elementwise.h"

namespace crema::bench {
namespace {

namespace ref = kernels::ref;
using kernels::ActivationKind;

// ResNet-50's stage-1 activations at batch 64: [64, 256, 56, 56].
const std::vector<BatchNormShape4> kPointwiseShapes = {{64, 256, 56, 56}};

std::string row_shape(const BatchNormShape4& s, const std::string& what, DType dtype) {
  return s.str() + " " + what + (what.empty() ? "" : " ") + dtype_name(dtype);
}

// The copies of a working set of `tensors` tensors of `bytes` each that keep timed calls out of L2.
int copies_of(double bytes, int tensors) {
  return rotation_copies(size_t(bytes * tensors));
}

// One activation: relu (relu.h) or a kind of pointwise.h.
struct ActivationCase {
  const char* name;
  bool relu;            // relu.h's call (kind unused)
  ActivationKind kind;  // pointwise.h's
};
const ActivationCase kActivations[] = {
    {"relu", true, ActivationKind::sigmoid},   {"sigmoid", false, ActivationKind::sigmoid},
    {"tanh", false, ActivationKind::tanh},     {"silu", false, ActivationKind::swish},
    {"gelu", false, ActivationKind::gelu_erf}, {"gelu_tanh", false, ActivationKind::gelu_tanh},
};

void forward_of(Context& ctx, const ActivationCase& a, const Tensor& x, Tensor& y) {
  kernels::Activation act;
  act.kind = a.kind;
  if (a.relu) {
    kernels::relu_forward(ctx, x, y, 0.0f);
  } else {
    kernels::activation_forward(ctx, act, x, y);
  }
}

void backward_of(Context& ctx, const ActivationCase& a, const Tensor& saved, const Tensor& dy,
                 Tensor& dx) {
  kernels::Activation act;
  act.kind = a.kind;
  if (a.relu) {
    kernels::relu_backward(ctx, saved, dy, dx, 0.0f);
  } else {
    kernels::activation_backward(ctx, act, saved, dy, dx);
  }
}

// Whether the backward reads the forward's output (relu, sigmoid, tanh) rather than its input.
bool reads_output(const ActivationCase& a) {
  return a.relu || kernels::backward_reads(a.kind) == kernels::BackwardReads::output;
}

void bench_activation_case(Context& ctx, const Options& options, Table& table,
                           const BatchNormShape4& s, const ActivationCase& a, const Input& x,
                           const Input& dy) {
  const DType dtype = storage_of(options);
  const int64_t n = int64_t(x.exact.size());
  const double tensor = double(n) * double(dtype_size(dtype));
  const int copies = copies_of(tensor, 3);
  std::vector<Tensor> xs, ys, dys, dxs;
  for (int k = 0; k < copies; ++k) {
    xs.push_back(upload(ctx, x.host));
    ys.push_back(upload(ctx, x.host));
    dys.push_back(upload(ctx, dy.host));
    dxs.push_back(upload(ctx, dy.host));
    forward_of(ctx, a, xs[k], ys[k]);
  }
  std::vector<double> y_ref(x.exact.size()), dx_ref(x.exact.size());
  kernels::Activation act;
  act.kind = a.kind;
  if (a.relu) ref::relu_forward(n, x.exact.data(), y_ref.data(), 0.0);
  if (!a.relu) ref::activation_forward(act, n, x.exact.data(), y_ref.data());
  // The backward's reference reads what the device's backward reads (its own y, or x), so that
  // it checks the backward alone.
  const std::vector<double> saved = reads_output(a) ? download(ctx, ys[0]) : x.exact;
  const std::vector<Tensor>& saved_tensors = reads_output(a) ? ys : xs;
  if (a.relu) ref::relu_backward(n, saved.data(), dy.exact.data(), dx_ref.data(), 0.0);
  if (!a.relu) ref::activation_backward(act, n, saved.data(), dy.exact.data(), dx_ref.data());
  backward_of(ctx, a, saved_tensors[0], dys[0], dxs[0]);

  Row row;
  row.shape = row_shape(s, "", dtype);
  row.version = "vectorized";
  row.tolerance = tolerance_of(dtype);
  row.pass = std::string(a.name) + " fwd";
  row.rel_error = worst_error(ctx, {&ys[0]}, {&y_ref});
  row.bytes = 2 * tensor;
  time_row(ctx, options, table, row, [&](int i) {
    const int k = i % copies;
    forward_of(ctx, a, xs[k], ys[k]);
  });
  row.pass = std::string(a.name) + " bwd";
  row.rel_error = worst_error(ctx, {&dxs[0]}, {&dx_ref});
  row.bytes = 3 * tensor;
  time_row(ctx, options, table, row, [&](int i) {
    const int k = i % copies;
    backward_of(ctx, a, saved_tensors[k], dys[k], dxs[k]);
  });
}

}  // namespace

int bench_activation(Context& ctx, const Options& options, std::ostream& out) {
  const DType dtype = storage_of(options);
  Table table = open_table(ctx, dtype_name(dtype), out);
  Random random(6);
  for (const BatchNormShape4& s : shapes_of(options, kPointwiseShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const Input x = make_input(shape, dtype, Layout::nchw, random, -4.0, 4.0);
    const Input dy = make_input(shape, dtype, Layout::nchw, random, -1.0, 1.0);
    for (const ActivationCase& a : kActivations) {
      bench_activation_case(ctx, options, table, s, a, x, dy);
    }
  }
  return table.status();
}

int bench_eltwise(Context& ctx, const Options& options, std::ostream& out) {
  const DType dtype = storage_of(options);
  Table table = open_table(ctx, dtype_name(dtype), out);
  Random random(7);
  for (const BatchNormShape4& s : shapes_of(options, kPointwiseShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const Input a = make_input(shape, dtype, Layout::nchw, random, -1.0, 1.0);
    const Input b = make_input(shape, dtype, Layout::nchw, random, -1.0, 1.0);
    std::vector<double> sum_ref(a.exact.size());
    ref::add(int64_t(a.exact.size()), a.exact.data(), b.exact.data(), sum_ref.data());
    const double tensor = double(a.exact.size()) * double(dtype_size(dtype));
    const int copies = copies_of(tensor, 3);
    std::vector<Tensor> as, bs, outs;
    for (int k = 0; k < copies; ++k) {
      as.push_back(upload(ctx, a.host));
      bs.push_back(upload(ctx, b.host));
      outs.push_back(upload(ctx, a.host));
    }
    kernels::add(ctx, as[0], bs[0], outs[0]);
    Row row;
    row.shape = row_shape(s, "", dtype);
    row.version = "vectorized";
    row.tolerance = tolerance_of(dtype);
    row.pass = "a+b";
    row.rel_error = worst_error(ctx, {&outs[0]}, {&sum_ref});
    row.bytes = 3 * tensor;
    time_row(ctx, options, table, row, [&](int i) {
      const int k = i % copies;
      kernels::add(ctx, as[k], bs[k], outs[k]);
    });
    // In place: checked on a fresh copy of a; the timed calls keep adding b to as[k].
    Tensor in_place = upload(ctx, a.host);
    kernels::add(ctx, in_place, bs[0], in_place);
    row.pass = "a+=b";
    row.rel_error = worst_error(ctx, {&in_place}, {&sum_ref});
    time_row(ctx, options, table, row, [&](int i) {
      const int k = i % copies;
      kernels::add(ctx, as[k], bs[k], as[k]);
    });
  }
  return table.status();
}

int bench_dropout(Context& ctx, const Options& options, std::ostream& out) {
  constexpr float kRatio = 0.5f;
  constexpr uint64_t kSeed = 17;
  const DType dtype = storage_of(options);
  Table table = open_table(ctx, dtype_name(dtype), out);
  Random random(8);
  for (const BatchNormShape4& s : shapes_of(options, kPointwiseShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const Input x = make_input(shape, dtype, Layout::nchw, random, -1.0, 1.0);
    const Input dy = make_input(shape, dtype, Layout::nchw, random, -1.0, 1.0);
    const int64_t n = int64_t(x.exact.size());
    const double tensor = double(n) * double(dtype_size(dtype));
    const int copies = copies_of(tensor, 2);
    std::vector<Tensor> xs, ys, dys, dxs;
    for (int k = 0; k < copies; ++k) {
      xs.push_back(upload(ctx, x.host));
      ys.push_back(upload(ctx, x.host));
      dys.push_back(upload(ctx, dy.host));
      dxs.push_back(upload(ctx, dy.host));
    }
    // The first forward advances the counter from 0 to 1 and draws step 1's mask.
    Tensor step = kernels::dropout_step_counter(ctx);
    kernels::dropout_forward(ctx, xs[0], ys[0], kRatio, kSeed, step);
    kernels::dropout_backward(ctx, dys[0], dxs[0], kRatio, kSeed, step);
    std::vector<double> y_ref(x.exact.size()), dx_ref(x.exact.size());
    ref::dropout_forward(n, x.exact.data(), y_ref.data(), kRatio, kSeed, uint64_t(1));
    ref::dropout_backward(n, dy.exact.data(), dx_ref.data(), kRatio, kSeed, uint64_t(1));
    Row row;
    row.shape = row_shape(s, "p0.5", dtype);
    row.version = "vectorized";
    row.tolerance = tolerance_of(dtype);
    row.pass = "fwd";
    row.rel_error = worst_error(ctx, {&ys[0]}, {&y_ref});
    row.bytes = 2 * tensor;
    time_row(ctx, options, table, row, [&](int i) {
      const int k = i % copies;
      kernels::dropout_forward(ctx, xs[k], ys[k], kRatio, kSeed, step);
    });
    row.pass = "bwd";
    row.rel_error = worst_error(ctx, {&dxs[0]}, {&dx_ref});
    time_row(ctx, options, table, row, [&](int i) {
      const int k = i % copies;
      kernels::dropout_backward(ctx, dys[k], dxs[k], kRatio, kSeed, step);
    });
  }
  return table.status();
}

int bench_concat(Context& ctx, const Options& options, std::ostream& out) {
  const DType dtype = storage_of(options);
  Table table = open_table(ctx, dtype_name(dtype), out);
  Random random(9);
  // ResNet-style [64, 128, 28, 28] parts (a DenseNet or U-Net skip join), two along C.
  for (const BatchNormShape4& s : shapes_of(options, {{64, 128, 28, 28}})) {
    const Shape part_shape{s.N, s.C, s.H, s.W}, whole_shape{s.N, 2 * s.C, s.H, s.W};
    const Input p0 = make_input(part_shape, dtype, Layout::nchw, random, -1.0, 1.0);
    const Input p1 = make_input(part_shape, dtype, Layout::nchw, random, -1.0, 1.0);
    const Input dwhole = make_input(whole_shape, dtype, Layout::nchw, random, -1.0, 1.0);
    const int64_t inner = s.H * s.W, extents[2] = {s.C, s.C};
    std::vector<double> whole_ref(2 * p0.exact.size());
    std::vector<double> d0_ref(p0.exact.size()), d1_ref(p0.exact.size());
    const double* parts[2] = {p0.exact.data(), p1.exact.data()};
    double* dparts[2] = {d0_ref.data(), d1_ref.data()};
    ref::concat(s.N, inner, 2, extents, parts, whole_ref.data());
    ref::slice(s.N, inner, 2, extents, dwhole.exact.data(), dparts);
    const double whole_bytes = double(whole_ref.size()) * double(dtype_size(dtype));
    const int copies = copies_of(whole_bytes, 4);
    std::vector<Tensor> p0s, p1s, wholes, dwholes, d0s, d1s;
    for (int k = 0; k < copies; ++k) {
      p0s.push_back(upload(ctx, p0.host));
      p1s.push_back(upload(ctx, p1.host));
      wholes.push_back(upload(ctx, dwhole.host));
      dwholes.push_back(upload(ctx, dwhole.host));
      d0s.push_back(upload(ctx, p0.host));
      d1s.push_back(upload(ctx, p1.host));
    }
    auto concat_call = [&](int k) {
      kernels::concat(ctx, {&p0s[size_t(k)], &p1s[size_t(k)]}, 1, wholes[size_t(k)]);
    };
    auto slice_call = [&](int k) {
      kernels::slice(ctx, dwholes[size_t(k)], 1, {s.C, s.C}, {&d0s[size_t(k)], &d1s[size_t(k)]});
    };
    concat_call(0);
    slice_call(0);
    Row row;
    row.shape = row_shape(s, "x2 along C", dtype);
    row.version = "fused";
    row.tolerance = tolerance_of(dtype);
    row.pass = "fwd";
    row.rel_error = worst_error(ctx, {&wholes[0]}, {&whole_ref});
    row.bytes = 2 * whole_bytes;
    time_row(ctx, options, table, row, [&](int i) { concat_call(i % copies); });
    row.pass = "bwd";
    row.rel_error = worst_error(ctx, {&d0s[0], &d1s[0]}, {&d0_ref, &d1_ref});
    time_row(ctx, options, table, row, [&](int i) { slice_call(i % copies); });
  }
  return table.status();
}

}  // namespace crema::bench
