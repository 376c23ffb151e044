// crema bench batch-norm: the channels-last batch norm (x [N, C, H, W] in nhwc, normalized as the
// N*H*W rows of C channels its memory holds: S == 1) in every row version
// (cuda::batch_norm_row_versions()), plain, + ReLU and + add + ReLU (batch_norm_relu.h), checked
// against the CPU path (cpu::, float) on the same exact inputs, then timed one pass at a time:
// the training forward (batch statistics) and the backward (dx, dgamma, dbeta; dr with the add).
//
// Storage: bf16 for --math bf16, f32 for fp32 and tf32 (a tf32 net runs its batch norms in f32);
// parameters and statistics f32. Bytes, the fewest a pass must move, T the tensor's bytes (the
// per-channel parameters and partials are negligible): forward 3T (x for the statistics, x again,
// y), 4T with r; backward 5T (x and dy for the sums, x, dy and dx), 7T with r (x, r, dy -> dr,
// then x, dr -> dx). The %peak column is of the device's copy bandwidth, measured first: a
// device-to-device copy of 1 GB, which reads and writes every byte (PyTorch's peer,
// scripts/bench/peer_batch_norm.py, prints the same columns).
#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "core/error.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/batch_norm_relu.h"

namespace crema::bench {
namespace {

namespace cuda = kernels::cuda;
using cuda::BatchNormVersion;
using kernels::BatchNormShape;

constexpr float kEps = 1e-5f, kMomentum = 0.1f;

enum class Form { plain, relu, add_relu };
struct FormName {
  Form form;
  const char* name;
};
constexpr FormName kForms[] = {
    {Form::plain, "bn"}, {Form::relu, "relu"}, {Form::add_relu, "add_relu"}};

std::vector<BatchNormVersion> versions_to_run(const Options& options) {
  std::vector<BatchNormVersion> versions;
  std::string names;
  for (const BatchNormVersion v : cuda::batch_norm_row_versions()) {
    if (options.version.empty() || options.version == cuda::batch_norm_version_name(v)) {
      versions.push_back(v);
    }
    names += std::string(names.empty() ? "" : ", ") + cuda::batch_norm_version_name(v);
  }
  if (versions.empty()) {
    throw Error("--version '" + options.version + "': no such channels-last batch norm version (" +
                names + ")");
  }
  return versions;
}

// The inputs on the host, exact in the storage type, and the CPU's outputs for one form.
struct Problem {
  Shape shape;       // [N, C, H, W], stored nhwc
  BatchNormShape s;  // [N*H*W, C, 1]
  DType dtype;
  std::vector<float> x, r, dy, gamma, beta;

  Problem(const BatchNormShape4& b, DType type, Random& random)
      : shape{b.N, b.C, b.H, b.W}, s{b.N * b.H * b.W, b.C, 1}, dtype(type) {
    const auto values = [&](size_t n, double low, double high, bool in_storage_type) {
      std::vector<float> v(n);
      for (float& e : v) {
        e = float(random.uniform(low, high));
        if (in_storage_type) e = exact(e);
      }
      return v;
    };
    const size_t n = size_t(s.N * s.C), C = size_t(s.C);
    x = values(n, -1.0, 2.0, true);
    for (size_t i = 0; i < n; ++i) x[i] = exact(x[i] + float(i % C % 5) * 0.25f);
    r = values(n, -1.0, 1.0, true);
    dy = values(n, -1.0, 1.0, true);
    gamma = values(C, 0.5, 1.5, false);
    beta = values(C, -0.5, 0.5, false);
  }
  // v rounded to the storage type (and so exact in it).
  float exact(float v) const { return dtype == DType::bf16 ? to_f32(to_bf16(v)) : v; }
  double tensor_bytes() const { return double(s.N * s.C) * double(dtype_size(dtype)); }
};

// What both devices produce, in one list: y, dx, dr (with the add), mean, invstd, dgamma, dbeta.
using Outputs = std::vector<std::vector<float>>;

Outputs cpu_outputs(const Problem& p, Form form, int threads) {
  const size_t n = p.x.size(), C = p.gamma.size();
  std::vector<float> y(n), dx(n), dr(form == Form::add_relu ? n : 0), mean(C), invstd(C),
      rm(C, 0.0f), rv(C, 1.0f), dgamma(C, 0.0f), dbeta(C, 0.0f), tracked(1, 0.0f);
  const float* r = form == Form::add_relu ? p.r.data() : nullptr;
  if (form == Form::plain) {
    kernels::cpu::batch_norm_forward_training(p.s, p.x.data(), p.gamma.data(), p.beta.data(), kEps,
                                              kMomentum, y.data(), mean.data(), invstd.data(),
                                              rm.data(), rv.data(), tracked.data(), threads);
    kernels::cpu::batch_norm_backward(p.s, p.x.data(), p.dy.data(), p.gamma.data(), mean.data(),
                                      invstd.data(), true, dx.data(), dgamma.data(), dbeta.data(),
                                      threads);
  } else {
    kernels::cpu::batch_norm_relu_forward_training<float>(
        p.s, p.x.data(), r, p.gamma.data(), p.beta.data(), kEps, kMomentum, y.data(), nullptr,
        mean.data(), invstd.data(), rm.data(), rv.data(), tracked.data(), threads);
    kernels::cpu::batch_norm_relu_backward<float>(
        p.s, p.x.data(), r ? y.data() : nullptr, p.dy.data(), p.gamma.data(), p.beta.data(),
        mean.data(), invstd.data(), true, dx.data(), r ? dr.data() : nullptr, dgamma.data(),
        dbeta.data(), threads);
  }
  return {y, dx, dr, mean, invstd, dgamma, dbeta};
}

// The device's tensors: `copies` sets of x, r, dy, y, dx, dr (the timing rotates through them so
// that no pass finds its inputs in L2), the parameters and statistics, the workspace.
struct DeviceProblem {
  const Problem& p;
  int copies;
  std::vector<Tensor> x, r, dy, y, dx, dr;
  Tensor gamma, beta, mean, invstd, dgamma, dbeta, workspace;
  Tensor poison;  // NaN in the storage type, on the host: what the check's outputs start as

  DeviceProblem(Context& ctx, const Problem& problem, int n_copies) : p(problem), copies(n_copies) {
    const Tensor hx = host(p.x), hr = host(p.r), hdy = host(p.dy);
    for (int k = 0; k < copies; ++k) {
      x.push_back(upload(ctx, hx));
      r.push_back(upload(ctx, hr));
      dy.push_back(upload(ctx, hdy));
      for (std::vector<Tensor>* out : {&y, &dx, &dr}) out->push_back(ctx.empty(p.shape, p.dtype));
    }
    gamma = upload(ctx, Tensor::from_vector({p.s.C}, p.gamma));
    beta = upload(ctx, Tensor::from_vector({p.s.C}, p.beta));
    mean = ctx.empty({p.s.C}), invstd = ctx.empty({p.s.C});
    dgamma = ctx.zeros({p.s.C}), dbeta = ctx.zeros({p.s.C});
    size_t bytes = 16;
    for (const BatchNormVersion v : cuda::batch_norm_row_versions()) {
      bytes = std::max(bytes, cuda::batch_norm_workspace_bytes(p.s, v));
    }
    workspace = ctx.empty({int64_t((bytes + 3) / 4)});
    poison = Tensor(p.shape, p.dtype);
    poison.fill(NAN);
  }

  Tensor host(const std::vector<float>& values) const {
    Tensor t(p.shape, p.dtype);
    if (p.dtype == DType::f32) {
      std::copy(values.begin(), values.end(), t.data<float>());
    } else {
      bf16_t* d = t.data<bf16_t>();
      for (size_t i = 0; i < values.size(); ++i) d[i] = to_bf16(values[i]);
    }
    return t;
  }
  static Tensor upload(Context& ctx, const Tensor& host) {
    Tensor t = ctx.empty(host.shape(), host.dtype());
    t.copy_from(host);
    return t;
  }

  template <class T>
  void forward(BatchNormVersion v, Form form, int k, gpu::Stream stream) {
    float* const none = nullptr;
    if (form == Form::plain) {
      cuda::batch_norm_forward_training(p.s, x[k].data<T>(), gamma.data<float>(),
                                        beta.data<float>(), kEps, kMomentum, y[k].data<T>(),
                                        mean.data<float>(), invstd.data<float>(), none, none, none,
                                        workspace.data<float>(), v, stream);
    } else {
      const T* rk = form == Form::add_relu ? r[k].data<T>() : nullptr;
      cuda::batch_norm_relu_forward_training(
          p.s, x[k].data<T>(), rk, gamma.data<float>(), beta.data<float>(), kEps, kMomentum,
          y[k].data<T>(), static_cast<T*>(nullptr), mean.data<float>(), invstd.data<float>(), none,
          none, none, workspace.data<float>(), v, stream);
    }
  }

  template <class T>
  void backward(BatchNormVersion v, Form form, int k, gpu::Stream stream) {
    if (form == Form::plain) {
      cuda::batch_norm_backward(p.s, x[k].data<T>(), dy[k].data<T>(), gamma.data<float>(),
                                mean.data<float>(), invstd.data<float>(), true, dx[k].data<T>(),
                                dgamma.data<float>(), dbeta.data<float>(), workspace.data<float>(),
                                v, stream);
    } else {
      const bool add = form == Form::add_relu;
      cuda::batch_norm_relu_backward(
          p.s, x[k].data<T>(), add ? y[k].data<T>() : nullptr, dy[k].data<T>(), gamma.data<float>(),
          beta.data<float>(), mean.data<float>(), invstd.data<float>(), true, dx[k].data<T>(),
          add ? dr[k].data<T>() : nullptr, dgamma.data<float>(), dbeta.data<float>(),
          workspace.data<float>(), v, stream);
    }
  }

  void run(BatchNormVersion v, Form form, bool backward_pass, int k, gpu::Stream stream) {
    if (p.dtype == DType::bf16 && backward_pass) {
      backward<bf16_t>(v, form, k, stream);
    } else if (p.dtype == DType::bf16) {
      forward<bf16_t>(v, form, k, stream);
    } else if (backward_pass) {
      backward<float>(v, form, k, stream);
    } else {
      forward<float>(v, form, k, stream);
    }
  }

  // One forward and one backward on copy 0, from zeroed parameter gradients; their outputs.
  Outputs check_run(Context& ctx, BatchNormVersion v, Form form) {
    ctx.fill(dgamma, 0.0f);
    ctx.fill(dbeta, 0.0f);
    for (Tensor* t : {&y[0], &dx[0], &dr[0]}) t->copy_from(poison);
    run(v, form, false, 0, ctx.stream());
    run(v, form, true, 0, ctx.stream());
    ctx.synchronize();
    return {y[0].to_vector(),
            dx[0].to_vector(),
            form == Form::add_relu ? dr[0].to_vector() : std::vector<float>{},
            mean.to_vector(),
            invstd.to_vector(),
            dgamma.to_vector(),
            dbeta.to_vector()};
  }
};

double worst_error(const Outputs& got, const Outputs& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<double> ref(want[i].begin(), want[i].end());
    const double e = relative_error(got[i].data(), ref.data(), ref.size());
    if (!(e <= worst)) worst = e;  // NaN sticks
  }
  return worst;
}

}  // namespace

int bench_batch_norm(Context& ctx, const Options& options, std::ostream& out) {
  const DType dtype = options.math == "bf16" ? DType::bf16 : DType::f32;
  const std::vector<BatchNormVersion> versions = versions_to_run(options);
  std::vector<BatchNormShape4> shapes;
  for (const std::string& text : options.shapes) shapes.push_back(parse_batch_norm_shape(text));
  if (shapes.empty()) shapes = default_batch_norm_shapes();

  DevicePeak peak = device_peak(ctx);
  peak.dram_gbps = copy_gbps(ctx);
  out << "copy bandwidth (device to device, read + write): " << int(peak.dram_gbps)
      << " GB/s; the %peak column is of it (x in nhwc, " << dtype_name(dtype) << ")\n";
  Table table(out, peak);
  Random random(1);
  const double tolerance = (dtype == DType::bf16 ? std::ldexp(1.0, -8) : 0.0) + 1e-5;
  for (const BatchNormShape4& shape : shapes) {
    const Problem p(shape, dtype, random);
    const double tensor = p.tensor_bytes();
    DeviceProblem device(ctx, p, rotation_copies(size_t(3 * tensor)));
    for (const auto& [form_entry, form_name] : kForms) {
      const Form form = form_entry;  // a copy: C++17 lambdas cannot capture a structured binding
      const Outputs expected = cpu_outputs(p, form, ctx.num_threads());
      for (const BatchNormVersion v : versions) {
        const double error = worst_error(device.check_run(ctx, v, form), expected);
        for (const bool backward : {false, true}) {
          Row row;
          row.shape = shape.str() + " " + dtype_name(dtype) + " nhwc";
          row.pass = std::string(form_name) + (backward ? "_bwd" : "_fwd");
          row.version = cuda::batch_norm_version_name(v);
          row.check = "cpu";
          row.rel_error = error;
          row.tolerance = tolerance;
          const bool add = form == Form::add_relu;
          row.bytes = tensor * (backward ? (add ? 7 : 5) : (add ? 4 : 3));
          row.peak = "dram";
          row.workspace_bytes = double(cuda::batch_norm_workspace_bytes(p.s, v));
          if (error <= tolerance) {
            row.ms = measure_ms(ctx, options, [&](int i) {
              device.run(v, form, backward, i % device.copies, ctx.stream());
            });
          }
          table.print(row);
        }
      }
    }
  }
  return table.status();
}

}  // namespace crema::bench
