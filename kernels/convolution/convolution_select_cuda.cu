// Algorithm selection for convolution: the heuristic (get) and the measurement (find). Host code
// only; it lives in a .cu file because it calls the cuda:: versions, which a build without CUDA
// lacks (convolution_select_nocuda.cpp stands in there).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "kernels/convolution/convolution_select.h"

namespace crema::kernels {
namespace {

constexpr int kTimedRuns = 5;
constexpr uint64_t kSeed = 0x5e1ec7;  // find's inputs: fixed, so a shape measures the same way

Tensor random_tensor(Context& ctx, const Shape& shape, Random& random) {
  Tensor host(shape);
  float* p = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i) p[i] = float(random.uniform(-1.0, 1.0));
  Tensor device = ctx.empty(shape);
  device.copy_from(host);
  return device;
}

double relative_difference(const std::vector<float>& out, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = double(out[i]) - double(ref[i]);
    diff += d * d;
    norm += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// One pass of one version on fixed tensors: the output is poisoned (forward, data: NaN, so an
// element left unwritten fails the check) or zeroed (filter: it accumulates), then computed.
class PassRunner {
 public:
  PassRunner(Context& ctx, cuda::ConvPass pass, const Conv2dGeometry& g)
      : ctx_(ctx), pass_(pass), g_(g) {
    Random random(kSeed);
    const Shape x_shape{g.N, g.C, g.H, g.W}, w_shape{g.K, g.C / g.groups, g.R, g.S},
        y_shape{g.N, g.K, g.P(), g.Q()};
    switch (pass) {
      case cuda::ConvPass::forward:
        a_ = random_tensor(ctx, x_shape, random);  // x
        b_ = random_tensor(ctx, w_shape, random);  // w
        out_ = ctx.empty(y_shape);                 // y
        break;
      case cuda::ConvPass::backward_data:
        a_ = random_tensor(ctx, y_shape, random);  // dy
        b_ = random_tensor(ctx, w_shape, random);  // w
        out_ = ctx.empty(x_shape);                 // dx
        break;
      case cuda::ConvPass::backward_filter:
        a_ = random_tensor(ctx, x_shape, random);  // x
        b_ = random_tensor(ctx, y_shape, random);  // dy
        out_ = ctx.empty(w_shape);                 // dw
        break;
    }
  }

  // Queues one call of `version` in `math_` on the stream.
  void launch(cuda::ConvVersion version, float* workspace) {
    const gpu::Stream stream = ctx_.stream();
    switch (pass_) {
      case cuda::ConvPass::forward:
        return cuda::conv2d_forward(g_, a_.data<float>(), b_.data<float>(), nullptr,
                                    out_.data<float>(), workspace, stream, version, math_);
      case cuda::ConvPass::backward_data:
        return cuda::conv2d_backward_data(g_, a_.data<float>(), b_.data<float>(),
                                          out_.data<float>(), workspace, stream, version, math_);
      case cuda::ConvPass::backward_filter:
        return cuda::conv2d_backward_filter(g_, a_.data<float>(), b_.data<float>(),
                                            out_.data<float>(), nullptr, workspace, stream, version,
                                            math_);
    }
  }

  void set_math(cuda::GemmMath math) { math_ = math; }

  // Runs `version` once from a fresh output and returns that output.
  std::vector<float> run_once(cuda::ConvVersion version, float* workspace) {
    const bool accumulates = pass_ == cuda::ConvPass::backward_filter;
    ctx_.fill(out_, accumulates ? 0.0f : std::nanf(""));
    launch(version, workspace);
    ctx_.synchronize();
    return out_.to_vector();
  }

 private:
  Context& ctx_;
  cuda::ConvPass pass_;
  Conv2dGeometry g_;
  Tensor a_, b_, out_;
  cuda::GemmMath math_ = cuda::GemmMath::fp32;
};

// Median of kTimedRuns calls after one warm-up, timed with events on the stream.
double median_ms(Context& ctx, PassRunner& runner, cuda::ConvVersion version, float* workspace) {
  const gpu::Event start = gpu::create_event(), stop = gpu::create_event();
  std::vector<double> times;
  runner.launch(version, workspace);
  for (int i = 0; i < kTimedRuns; ++i) {
    gpu::record(start, ctx.stream());
    runner.launch(version, workspace);
    gpu::record(stop, ctx.stream());
    gpu::synchronize_event(stop);
    times.push_back(gpu::elapsed_ms(start, stop));
  }
  gpu::destroy_event(start);
  gpu::destroy_event(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int rank(ConvAlgorithmStatus status) {
  switch (status) {
    case ConvAlgorithmStatus::ok:
      return 0;
    case ConvAlgorithmStatus::mismatch:
      return 1;
    case ConvAlgorithmStatus::over_workspace_limit:
      return 2;
  }
  return 3;
}

}  // namespace

cuda::ConvVersion get_conv_algorithm(cuda::ConvPass pass, const Conv2dGeometry& g,
                                     cuda::GemmMath math) {
  switch (pass) {
    case cuda::ConvPass::forward:
      return cuda::forward_version(g, math);
    case cuda::ConvPass::backward_data:
      return cuda::backward_data_version(g, math);
    case cuda::ConvPass::backward_filter:
      return cuda::backward_filter_version(g, math);
  }
  return cuda::ConvVersion::best;
}

size_t conv_algorithm_workspace_bytes(cuda::ConvVersion version, cuda::ConvPass pass,
                                      const Conv2dGeometry& g) {
  size_t floats = 0;
  switch (pass) {
    case cuda::ConvPass::forward:
      floats = cuda::conv2d_forward_workspace(g, version);
      break;
    case cuda::ConvPass::backward_data:
      floats = cuda::conv2d_backward_data_workspace(g, version);
      break;
    case cuda::ConvPass::backward_filter:
      floats = cuda::conv2d_backward_filter_workspace(g, false, version);
      break;
  }
  return floats * sizeof(float);
}

std::vector<ConvAlgorithmPerf> find_conv_algorithms(Context& ctx, cuda::ConvPass pass,
                                                    const Conv2dGeometry& g,
                                                    size_t workspace_limit_bytes,
                                                    cuda::GemmMath math) {
  const std::string op = std::string("find_conv_algorithms (") + cuda::conv_pass_name(pass) + ")";
  if (!ctx.device().is_cuda()) {
    throw Error(op + ": measuring needs a CUDA context, this one runs on " + ctx.device().str());
  }
  g.validate(op);
  ctx.synchronize();  // the scratch tensors may reuse memory that queued work still reads
  PassRunner runner(ctx, pass, g);
  const cuda::ConvVersion heuristic = get_conv_algorithm(pass, g, cuda::GemmMath::fp32);
  auto workspace_for = [&](cuda::ConvVersion version) {
    const size_t floats = conv_algorithm_workspace_bytes(version, pass, g) / sizeof(float);
    return ctx.empty({int64_t(std::max<size_t>(floats, 1))});
  };
  Tensor heuristic_workspace = workspace_for(heuristic);
  const std::vector<float> reference =
      runner.run_once(heuristic, heuristic_workspace.data<float>());
  heuristic_workspace = Tensor();
  runner.set_math(math);  // the reference above ran in fp32

  std::vector<ConvAlgorithmPerf> results;
  for (cuda::ConvVersion version : cuda::conv_versions()) {
    if (!cuda::supports(version, pass, g)) continue;
    ConvAlgorithmPerf perf{version, ConvAlgorithmStatus::ok};
    perf.workspace_bytes = conv_algorithm_workspace_bytes(version, pass, g);
    if (perf.workspace_bytes > workspace_limit_bytes) {
      perf.status = ConvAlgorithmStatus::over_workspace_limit;
      results.push_back(perf);
      continue;
    }
    Tensor workspace = workspace_for(version);
    perf.rel_error =
        relative_difference(runner.run_once(version, workspace.data<float>()), reference);
    if (!(perf.rel_error <= conv_find_tolerance(math))) {  // NaN (an unwritten element) fails too
      perf.status = ConvAlgorithmStatus::mismatch;
    } else {
      perf.ms = median_ms(ctx, runner, version, workspace.data<float>());
    }
    results.push_back(perf);
  }
  // Ties keep ladder order, so equal timings pick the same version every time.
  std::stable_sort(results.begin(), results.end(),
                   [](const ConvAlgorithmPerf& a, const ConvAlgorithmPerf& b) {
                     if (rank(a.status) != rank(b.status)) return rank(a.status) < rank(b.status);
                     return a.status == ConvAlgorithmStatus::ok && a.ms < b.ms;
                   });
  return results;
}

}  // namespace crema::kernels
