// Algorithm selection for convolution: the measurement (find). It runs the records' passes
// through their pointers, so it is host code in every build (a build without CUDA has no records
// and no CUDA context to measure on).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "kernels/convolution/select.h"

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

// One pass of one algorithm on fixed tensors: the output is poisoned (forward, data: NaN, so an
// element left unwritten fails the check) or zeroed (filter: it accumulates), then computed.
class PassRunner {
 public:
  PassRunner(Context& ctx, ConvPass pass, const Conv2dGeometry& g) : ctx_(ctx), pass_(pass), g_(g) {
    Random random(kSeed);
    const Shape x_shape = g.x_shape(), w_shape = g.w_shape(), y_shape = g.y_shape();
    switch (pass) {
      case ConvPass::forward:
        a_ = random_tensor(ctx, x_shape, random);  // x
        b_ = random_tensor(ctx, w_shape, random);  // w
        out_ = ctx.empty(y_shape);                 // y
        break;
      case ConvPass::backward_data:
        a_ = random_tensor(ctx, y_shape, random);  // dy
        b_ = random_tensor(ctx, w_shape, random);  // w
        out_ = ctx.empty(x_shape);                 // dx
        break;
      case ConvPass::backward_filter:
        a_ = random_tensor(ctx, x_shape, random);  // x
        b_ = random_tensor(ctx, y_shape, random);  // dy
        out_ = ctx.empty(w_shape);                 // dw
        break;
    }
  }

  // Queues one call of `algorithm` in `math_` on the stream.
  void launch(const ConvAlgorithm& algorithm, float* workspace) {
    const gpu::Stream stream = ctx_.stream();
    switch (pass_) {
      case ConvPass::forward:
        return algorithm.forward(g_, a_.data<float>(), b_.data<float>(), nullptr,
                                 out_.data<float>(), workspace, stream, math_);
      case ConvPass::backward_data:
        return algorithm.backward_data(g_, a_.data<float>(), b_.data<float>(), out_.data<float>(),
                                       workspace, stream, math_);
      case ConvPass::backward_filter:
        return algorithm.backward_filter(g_, a_.data<float>(), b_.data<float>(), out_.data<float>(),
                                         nullptr, workspace, stream, math_);
    }
  }

  void set_math(cuda::GemmMath math) { math_ = math; }

  // Runs `algorithm` once from a fresh output and returns that output.
  std::vector<float> run_once(const ConvAlgorithm& algorithm, float* workspace) {
    const bool accumulates = pass_ == ConvPass::backward_filter;
    ctx_.fill(out_, accumulates ? 0.0f : std::nanf(""));
    launch(algorithm, workspace);
    ctx_.synchronize();
    return out_.to_vector();
  }

 private:
  Context& ctx_;
  ConvPass pass_;
  Conv2dGeometry g_;
  Tensor a_, b_, out_;
  cuda::GemmMath math_ = cuda::GemmMath::fp32;
};

// Median of kTimedRuns calls after one warm-up, timed with events on the stream.
double median_ms(Context& ctx, PassRunner& runner, const ConvAlgorithm& algorithm,
                 float* workspace) {
  const gpu::Event start = gpu::create_event(), stop = gpu::create_event();
  std::vector<double> times;
  runner.launch(algorithm, workspace);
  for (int i = 0; i < kTimedRuns; ++i) {
    gpu::record(start, ctx.stream());
    runner.launch(algorithm, workspace);
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

std::vector<ConvAlgorithmPerf> find_conv_algorithms(Context& ctx, ConvPass pass,
                                                    const Conv2dGeometry& g,
                                                    size_t workspace_limit_bytes,
                                                    cuda::GemmMath math) {
  const std::string op = std::string("find_conv_algorithms (") + conv_pass_name(pass) + ")";
  if (!ctx.device().is_cuda()) {
    throw Error(op + ": measuring needs a CUDA context, this one runs on " + ctx.device().str());
  }
  g.validate(op);
  ctx.synchronize();  // the scratch tensors may reuse memory that queued work still reads
  PassRunner runner(ctx, pass, g);
  const ConvAlgorithm& heuristic = get_conv_algorithm(pass, g, cuda::GemmMath::fp32);
  auto workspace_for = [&](const ConvAlgorithm& algorithm) {
    const size_t floats = algorithm.workspace(pass, g, false);
    return ctx.empty({int64_t(std::max<size_t>(floats, 1))});
  };
  Tensor heuristic_workspace = workspace_for(heuristic);
  const std::vector<float> reference =
      runner.run_once(heuristic, heuristic_workspace.data<float>());
  heuristic_workspace = Tensor();
  runner.set_math(math);  // the reference above ran in fp32

  std::vector<ConvAlgorithmPerf> results;
  for (const ConvAlgorithm* algorithm : conv_algorithms()) {
    if (!algorithm->supports(pass, g)) continue;
    ConvAlgorithmPerf perf{algorithm, ConvAlgorithmStatus::ok};
    perf.workspace_bytes = conv_algorithm_workspace_bytes(*algorithm, pass, g);
    if (perf.workspace_bytes > workspace_limit_bytes) {
      perf.status = ConvAlgorithmStatus::over_workspace_limit;
      results.push_back(perf);
      continue;
    }
    Tensor workspace = workspace_for(*algorithm);
    perf.rel_error =
        relative_difference(runner.run_once(*algorithm, workspace.data<float>()), reference);
    if (!(perf.rel_error <= conv_find_tolerance(math))) {  // NaN (an unwritten element) fails too
      perf.status = ConvAlgorithmStatus::mismatch;
    } else {
      perf.ms = median_ms(ctx, runner, *algorithm, workspace.data<float>());
    }
    results.push_back(perf);
  }
  // Ties keep ladder order, so equal timings pick the same algorithm every time.
  std::stable_sort(results.begin(), results.end(),
                   [](const ConvAlgorithmPerf& a, const ConvAlgorithmPerf& b) {
                     if (rank(a.status) != rank(b.status)) return rank(a.status) < rank(b.status);
                     return a.status == ConvAlgorithmStatus::ok && a.ms < b.ms;
                   });
  return results;
}

}  // namespace crema::kernels
