#include "apps/commands.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>

#include <fmt/format.h>

#include "apps/data_config.h"
#include "apps/input_feeder.h"
#include "apps/session.h"
#include "core/error.h"
#include "core/net.h"
#include "kernels/elementwise/elementwise.h"
#include "layers/register_layers.h"
#include "optim/solver.h"

namespace crema {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void check_inputs(Net& net, const data::DataLoader& loader, const ConfigNode& model) {
  if (!net.has_blob("data") || !net.has_blob("label")) {
    model.at("inputs").fail("model.inputs must declare 'data' and 'label': the data loader feeds "
                            "its images and labels into them");
  }
  const Shape& declared = net.inputs()[0].first == "data" ? net.inputs()[0].second : net.inputs()[1].second;
  if (declared != loader.dataset().sample_shape()) {
    model.at("inputs").at("data").fail(
        "model.inputs.data is " + shape_str(declared) + " but the samples of " +
        loader.dataset().description() + " are " + shape_str(loader.dataset().sample_shape()));
  }
}

// One pass over the whole test set; each output is averaged over samples.
std::vector<std::pair<std::string, double>> run_test(Net& net, data::DataLoader& loader, Context& ctx) {
  loader.start_epoch(0);
  InputFeeder feeder(ctx);
  std::vector<std::pair<std::string, double>> sums;
  int64_t samples = 0;
  feeder.stage(loader.next());
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    feeder.feed(net);
    const int64_t n = net.batch_size();
    if (b + 1 < loader.batches_per_epoch()) feeder.stage(loader.next());
    net.forward(ctx);
    const auto outputs = net.outputs();
    if (sums.empty()) {
      for (const auto& [name, value] : outputs) sums.emplace_back(name, 0.0);
    }
    for (size_t i = 0; i < outputs.size(); ++i) sums[i].second += outputs[i].second * double(n);
    samples += n;
  }
  for (auto& entry : sums) entry.second /= double(samples);
  return sums;
}

// An instantiated CUDA graph of the training step, destroyed with the run.
struct StepGraph {
  gpu::Graph exec = nullptr;
  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph() { gpu::destroy_graph(exec); }
};

int64_t parameter_count(const Net& net) {
  int64_t count = 0;
  for (const Param* p : net.learnable_params()) count += p->value.numel();
  return count;
}

std::string format_outputs(const std::vector<std::pair<std::string, double>>& outputs) {
  std::string text;
  for (const auto& [name, value] : outputs) text += fmt::format("{}{}={:.4f}", text.empty() ? "" : " ", name, value);
  return text;
}

}  // namespace

TrainSummary train_command(const CommandOptions& options, std::ostream& out) {
  Session s(options);
  Context& ctx = *s.ctx;
  const ConfigNode& data_node = s.root.at("data");
  auto train_loader = make_loader(data_node, "train", s.seed);
  std::unique_ptr<data::DataLoader> test_loader;
  if (data_node.has("test")) test_loader = make_loader(data_node, "test", s.seed);
  data_node.check_no_unknown_keys("data");

  const ConfigNode& model = s.root.at("model");
  Net train_net(model, Phase::train, train_loader->options().batch_size, s.registry, ctx);
  check_inputs(train_net, *train_loader, model);
  std::unique_ptr<Net> test_net;
  if (test_loader) {
    test_net = std::make_unique<Net>(model, Phase::test, test_loader->options().batch_size, s.registry, ctx);
    test_net->share_params_from(train_net);
    check_inputs(*test_net, *test_loader, model);
  }

  const ConfigNode& solver_node = s.root.at("solver");
  int64_t max_iter = 0;
  if (solver_node.has("max_iter")) {
    max_iter = solver_node.get<int64_t>("max_iter");
    solver_node.allow("max_epochs");
  } else {
    max_iter = solver_node.get<int64_t>("max_epochs") * train_loader->batches_per_epoch();
  }
  if (max_iter <= 0) solver_node.fail("solver: the run must have at least one iteration (max_iter or max_epochs)");
  const int64_t test_interval = solver_node.get<int64_t>("test_interval", 0);
  const int64_t display = std::max<int64_t>(1, solver_node.get<int64_t>("display", 100));
  const int64_t snapshot = solver_node.get<int64_t>("snapshot", 0);
  const bool cuda_graph = solver_node.get<bool>("cuda_graph", true);
  std::unique_ptr<Solver> solver = make_solver(solver_node, max_iter);
  solver_node.check_no_unknown_keys("solver");
  s.root.check_no_unknown_keys("the config");

  TrainSummary summary;
  summary.run_dir = options.out_dir.empty() ? "runs/" + s.name : options.out_dir;
  std::filesystem::create_directories(summary.run_dir);
  {
    std::ofstream resolved(summary.run_dir + "/config.yaml");
    resolved << "# resolved from " << options.config << "\n" << s.root.to_yaml() << "\n";
    if (!resolved) throw Error("cannot write " + summary.run_dir + "/config.yaml");
  }
  out << fmt::format("train {} on {} with {} thread(s): {} iterations of batch {} ({} per epoch), "
                     "{} parameters, run in {}\n",
                     s.name, ctx.device().str(), ctx.num_threads(), max_iter,
                     train_loader->options().batch_size, train_loader->batches_per_epoch(),
                     parameter_count(train_net), summary.run_dir);

  // The step's losses are summed on the device and read back once per display window, so a GPU
  // step never waits for the host. With cuda_graph (GPU only) forward, backward and the loss sum
  // are captured once, at the second iteration (the first allocates every buffer), and replayed.
  const bool use_graph = ctx.device().is_cuda() && cuda_graph;
  Tensor loss_sum = ctx.zeros({});  // a scalar, like the loss tops
  StepGraph graph;
  auto forward_backward = [&] {
    train_net.forward(ctx);
    for (const auto& [top, weight] : train_net.loss_tops()) kernels::axpy(ctx, weight, top->value, loss_sum);
    train_net.backward(ctx);
  };
  InputFeeder feeder(ctx);
  double train_seconds = 0.0;
  int64_t images = 0, window_iters = 0, window_images = 0;
  auto window_start = Clock::now();
  const auto train_start = Clock::now();
  const double wait_at_start = train_loader->wait_seconds();
  auto test_now = [&](int64_t iter) {
    if (!test_net) return std::vector<std::pair<std::string, double>>{};
    const auto test_start = Clock::now();
    auto results = run_test(*test_net, *test_loader, ctx);
    out << fmt::format("test  iter {:>6}  {}\n", iter, format_outputs(results)) << std::flush;
    train_seconds -= seconds_since(test_start);  // test passes are not training time
    return results;
  };
  feeder.stage(train_loader->next());
  for (int64_t iter = 0; iter < max_iter; ++iter) {
    feeder.feed(train_net);
    images += train_net.batch_size(), window_images += train_net.batch_size(), ++window_iters;
    if (iter + 1 < max_iter) feeder.stage(train_loader->next());
    if (use_graph && iter == 1) {
      gpu::begin_capture(ctx.stream());
      forward_backward();
      graph.exec = gpu::end_capture(ctx.stream());
    }
    if (graph.exec != nullptr) {
      gpu::launch(graph.exec, ctx.stream());
    } else {
      forward_backward();
    }
    solver->step(train_net.learnable_params(), iter, ctx);
    if ((iter + 1) % display == 0 || iter + 1 == max_iter) {
      const double mean_loss = double(loss_sum.to_vector()[0]) / double(window_iters);  // synchronizes
      if (!std::isfinite(mean_loss)) {
        throw Error(fmt::format("the loss became {} by iteration {}; lower solver.base_lr or check the "
                                "data (no weights were written for this run)", mean_loss, iter + 1));
      }
      const double seconds = seconds_since(window_start);
      if (iter + 1 <= display) summary.first_loss = mean_loss;
      summary.last_loss = mean_loss;
      out << fmt::format("iter {:>6}  loss {:.6g}  lr {:.6g}  {:.0f} img/s\n", iter + 1, mean_loss,
                         solver->learning_rate(iter), double(window_images) / seconds)
          << std::flush;
      ctx.fill(loss_sum, 0.0f);
      window_iters = 0, window_images = 0;
      window_start = Clock::now();
    }
    if (snapshot > 0 && (iter + 1) % snapshot == 0 && iter + 1 < max_iter) {
      train_net.save_weights(fmt::format("{}/iter_{}.safetensors", summary.run_dir, iter + 1));
    }
    if (test_interval > 0 && (iter + 1) % test_interval == 0 && iter + 1 < max_iter) {
      test_now(iter + 1);
      window_start = Clock::now();
    }
  }
  ctx.synchronize();
  train_seconds += seconds_since(train_start);
  summary.iterations = max_iter;
  summary.images_per_second = double(images) / train_seconds;
  summary.data_wait_share = (train_loader->wait_seconds() - wait_at_start) / train_seconds;
  train_net.save_weights(summary.run_dir + "/final.safetensors");
  out << fmt::format("trained {} iterations: {:.0f} img/s, waiting on data {:.1f}% of the time; "
                     "weights in {}/final.safetensors\n",
                     max_iter, summary.images_per_second, 100.0 * summary.data_wait_share,
                     summary.run_dir);
  if (ctx.device().is_cuda()) {
    out << fmt::format("{} memory: {:.1f} MiB in use, {:.1f} MiB at the peak\n", ctx.device().str(),
                       double(ctx.allocator().current_bytes()) / (1 << 20),
                       double(ctx.allocator().peak_bytes()) / (1 << 20));
  }
  summary.final_test = test_now(max_iter);
  if (!summary.final_test.empty()) out << "final test: " << format_outputs(summary.final_test) << "\n";
  return summary;
}

std::vector<std::pair<std::string, double>> test_command(const CommandOptions& options,
                                                         std::ostream& out) {
  if (options.weights.empty()) throw Error("crema test needs --weights FILE");
  Session s(options);
  Context& ctx = *s.ctx;
  const ConfigNode& data_node = s.root.at("data");
  data_node.allow("train");
  auto loader = make_loader(data_node, "test", s.seed);
  const ConfigNode& model = s.root.at("model");
  Net net(model, Phase::test, loader->options().batch_size, s.registry, ctx);
  check_inputs(net, *loader, model);
  net.load_weights(options.weights, true);
  const auto results = run_test(net, *loader, ctx);
  out << "test: " << format_outputs(results) << "\n";
  return results;
}

void summary_command(const CommandOptions& options, std::ostream& out) {
  Session s(options);
  const ConfigNode& model = s.root.at("model");
  int64_t batch = 1;
  if (s.root.has("data") && s.root.at("data").has("train")) {
    batch = s.root.at("data").at("train").get<int64_t>("batch_size", 1);
  }
  Net net(model, Phase::train, batch, s.registry, *s.ctx);
  out << s.name << " (train phase, batch " << batch << ")\n" << net.summary();
}

void devices_command(std::ostream& out) {
  Context cpu;
  out << fmt::format("cpu ({} threads)\n", cpu.num_threads());
  for (int i = 0; i < gpu::device_count(); ++i) {
    out << fmt::format("cuda:{} ({})\n", i, gpu::device_description(i));
  }
  if (!gpu::built_with_cuda()) out << "(this build has no CUDA backend)\n";
}

}  // namespace crema
