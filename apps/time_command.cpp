// crema time: where a training step's time goes, layer by layer (Caffe's `caffe time`).
//
// The train net is built at the config's training batch size and fed random pixels and valid
// labels (timing needs no dataset). After a warm-up step that allocates everything, each timed
// iteration runs every layer's forward, then every backward, timing each layer: with CUDA events
// on a GPU (the time the GPU spent, launch gaps included), with a steady clock on the CPU. Then the
// whole step (forward, backward, solver update) is timed without per-layer probes, and on a GPU
// also with forward and backward replayed as one CUDA graph. A layer with a choice of algorithms
// (Convolution: `algorithm:`) shows the ones it ran after its times.
#include <chrono>
#include <ostream>

#include <fmt/format.h>

#include "apps/commands.h"
#include "apps/session.h"
#include "core/error.h"
#include "core/net.h"
#include "kernels/convolution/select.h"
#include "optim/param_groups.h"
#include "optim/solver.h"

namespace crema {
namespace {

using Clock = std::chrono::steady_clock;

// Times `work` on the context's device, in milliseconds.
class Stopwatch {
 public:
  explicit Stopwatch(Context& ctx) : ctx_(ctx) {
    if (ctx_.device().is_cuda()) {
      start_ = gpu::create_event();
      stop_ = gpu::create_event();
    }
  }
  ~Stopwatch() {
    gpu::destroy_event(start_);
    gpu::destroy_event(stop_);
  }
  template <class Work>
  double time(Work&& work) {
    if (!ctx_.device().is_cuda()) {
      const auto t0 = Clock::now();
      work();
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    }
    gpu::record(start_, ctx_.stream());
    work();
    gpu::record(stop_, ctx_.stream());
    return gpu::elapsed_ms(start_, stop_);
  }

 private:
  Context& ctx_;
  gpu::Event start_ = nullptr, stop_ = nullptr;
};

void fill_inputs(Net& net, Context& ctx) {
  Tensor data(net.blob("data").value.shape());
  for (int64_t i = 0; i < data.numel(); ++i) data.data<float>()[i] = float(ctx.random().uniform01());
  net.blob("data").value.copy_from(data);
  Tensor labels(net.blob("label").value.shape());
  labels.fill(0.0f);  // a valid class for any classifier
  net.blob("label").value.copy_from(labels);
}

}  // namespace

TimeSummary time_command(const CommandOptions& options, std::ostream& out) {
  if (options.iterations < 1) throw Error("--iterations must be at least 1");
  Session s(options);
  Context& ctx = *s.ctx;
  const ConfigNode& data = s.root.at("data");
  const int64_t batch = data.at("train").get<int64_t>("batch_size");
  Net net(s.root.at("model"), Phase::train, batch, s.registry, ctx);
  if (!net.has_blob("data") || !net.has_blob("label")) {
    s.root.at("model").fail("crema time feeds the inputs 'data' and 'label'; model.inputs lacks one");
  }
  const ConfigNode& solver_node = s.root.at("solver");
  std::unique_ptr<Solver> solver = make_solver(solver_node, 1000);
  apply_param_groups(solver_node, net);
  fill_inputs(net, ctx);

  TimeSummary summary;
  summary.batch_size = batch;
  const size_t n = net.num_layers();
  for (size_t i = 0; i < n; ++i) {
    summary.layers.push_back({net.layer(i).name(), net.layer(i).type(), 0.0, 0.0, ""});
  }
  Stopwatch watch(ctx);
  auto step = [&](int64_t iter) {
    net.forward(ctx);
    net.backward(ctx);
    solver->step(net.learnable_params(), iter, ctx);
  };
  step(0);  // warm-up: allocations, workspace, solver state
  for (int it = 0; it < options.iterations; ++it) {
    for (size_t i = 0; i < n; ++i) summary.layers[i].forward_ms += watch.time([&] { net.forward_layer(i, ctx); });
    net.begin_backward(ctx);  // the loss gradients: the memory plan may have reused their bytes
    for (size_t i = n; i-- > 0;) summary.layers[i].backward_ms += watch.time([&] { net.backward_layer(i, ctx); });
    summary.solver_ms += watch.time([&] { solver->step(net.learnable_params(), it, ctx); });
  }
  summary.solver_ms /= options.iterations;
  for (size_t i = 0; i < n; ++i) {
    summary.layers[i].forward_ms /= options.iterations;
    summary.layers[i].backward_ms /= options.iterations;
    summary.layers[i].algorithm = net.layer(i).describe_algorithm();
  }
  summary.step_ms = watch.time([&] {
    for (int it = 0; it < options.iterations; ++it) step(it);
  }) / options.iterations;
  if (ctx.device().is_cuda()) {
    gpu::begin_capture(ctx.stream());
    net.forward(ctx);
    net.backward(ctx);
    const gpu::Graph graph = gpu::end_capture(ctx.stream());
    summary.graph_step_ms = watch.time([&] {
      for (int it = 0; it < options.iterations; ++it) {
        gpu::launch(graph, ctx.stream());
        solver->step(net.learnable_params(), it, ctx);
      }
    }) / options.iterations;
    gpu::destroy_graph(graph);
  }
  kernels::save_algorithm_cache(s.algo_cache, ctx.algorithm_cache());
  summary.peak_bytes = int64_t(ctx.allocator().peak_bytes());

  out << fmt::format("{} on {}, batch {}, {} iterations (milliseconds per iteration)\n", s.name,
                     ctx.device().str(), batch, options.iterations);
  out << fmt::format("{:<20} {:<16} {:>10} {:>10}\n", "layer", "type", "forward", "backward");
  double forward = 0, backward = 0;
  for (const auto& layer : summary.layers) {
    out << fmt::format("{:<20} {:<16} {:>10.4f} {:>10.4f}{}\n", layer.name, layer.type,
                       layer.forward_ms, layer.backward_ms,
                       layer.algorithm.empty() ? "" : "  " + layer.algorithm);
    forward += layer.forward_ms, backward += layer.backward_ms;
  }
  out << fmt::format("{:<37} {:>10.4f} {:>10.4f}\n", "sum of layers", forward, backward);
  out << fmt::format("solver update: {:.4f} ms ({} trained parameters)\n", summary.solver_ms,
                     count_parameters(net).trainable);
  out << fmt::format("training step: {:.4f} ms ({:.0f} img/s)\n", summary.step_ms,
                     double(batch) / summary.step_ms * 1e3);
  if (summary.graph_step_ms > 0) {
    out << fmt::format("training step, CUDA graph: {:.4f} ms ({:.0f} img/s)\n", summary.graph_step_ms,
                       double(batch) / summary.graph_step_ms * 1e3);
  }
  out << fmt::format("memory: {:.1f} MiB at the peak on {} ({})\n",
                     double(summary.peak_bytes) / (1 << 20), ctx.device().str(),
                     net.memory().planned ? "memory plan" : "model.memory_plan: false");
  return summary;
}

}  // namespace crema
