#include "apps/commands.h"

#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "apps/session.h"
#include "apps/training/checkpoint.h"
#include "apps/training/data_config.h"
#include "apps/training/evaluation.h"
#include "core/error.h"
#include "core/net.h"
#include "core/serialization.h"
#include "optim/param_groups.h"
#include "optim/solver.h"

namespace crema {
namespace {

std::string mib(int64_t bytes) {
  return fmt::format("{:.2f} MiB", double(bytes) / double(1 << 20));
}

std::string gib(int64_t bytes) {
  return fmt::format("{:.2f} GiB ({:.1f} MiB)", double(bytes) / double(1 << 30),
                     double(bytes) / double(1 << 20));
}

// Collects per-sample blobs of every test batch for --extract; saves [samples, ...] per blob.
class BlobExtractor {
 public:
  BlobExtractor(const std::vector<std::string>& names, Net& net)
      : names_(names), rows_(names.size()) {
    for (const std::string& name : names_) {
      net.keep(name);  // throws, listing the blobs there are; read after each forward
      const Tensor& value = net.blob(name).value;
      if (value.ndim() == 0 || value.dim(0) != net.batch_size()) {
        throw Error("--extract " + name + ": the blob is " + shape_str(value.shape()) +
                    ", not one row per sample (batch " + std::to_string(net.batch_size()) + ")");
      }
      const Shape& shape = value.shape();
      sample_shapes_.emplace_back(shape.begin() + 1, shape.end());
    }
  }
  void collect(Net& net) {
    for (size_t i = 0; i < names_.size(); ++i) {
      const std::vector<float> host = net.blob(names_[i]).value.to_vector();
      rows_[i].insert(rows_[i].end(), host.begin(), host.end());
    }
  }
  void save(const std::string& path) const {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (size_t i = 0; i < names_.size(); ++i) {
      Shape shape = sample_shapes_[i];
      shape.insert(shape.begin(), int64_t(rows_[i].size()) / shape_numel(sample_shapes_[i]));
      tensors.emplace_back(names_[i], Tensor::from_vector(shape, rows_[i]));
    }
    save_safetensors(path, tensors);
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<float>> rows_;
  std::vector<Shape> sample_shapes_;
};

}  // namespace

std::vector<std::pair<std::string, double>> test_command(const CommandOptions& options,
                                                         std::ostream& out) {
  if (options.weights.empty()) throw Error("crema test needs --weights FILE");
  if (options.extract.empty() != options.extract_to.empty()) {
    throw Error("--extract BLOB and --extract-to FILE go together");
  }
  Session s(options);
  Context& ctx = *s.ctx;
  const ConfigNode& data_node = s.root.at("data");
  data_node.allow("train");
  const ClassList classes = classes_of_weights(options.weights);
  const ConfigNode& model = s.root.at("model");
  auto loader = make_loader(data_node, "test", s.seed, nullptr,
                            classes.names.empty() ? nullptr : &classes, soft_target_classes(model));
  Net net(model, Phase::test, loader->options().batch_size, s.registry, ctx);
  check_inputs(net, *loader, model);
  const std::string notes = load_all_weights(net, options.weights);
  if (!notes.empty()) out << "weights from " << options.weights << ": " << notes << "\n";
  std::optional<BlobExtractor> extractor;
  if (!options.extract.empty()) extractor.emplace(options.extract, net);
  const auto results = run_test(net, *loader, ctx, [&](Net& n) {
    if (extractor) extractor->collect(n);
  });
  if (extractor) extractor->save(options.extract_to);
  out << "test: " << format_outputs(results) << "\n";
  return results;
}

void summary_command(const CommandOptions& options, std::ostream& out) {
  // Shapes and the plan need no device: the net is built on the host, as it would run on
  // --device (its precision rules), so a machine without a GPU plans a GPU's net.
  const Device plan_for = Device::parse(options.device);
  CommandOptions on_host = options;
  on_host.device = "cpu";
  Session s(on_host);
  const ConfigNode& model = s.root.at("model");
  int64_t batch = 1;
  if (s.root.has("data") && s.root.at("data").has("train")) {
    batch = s.root.at("data").at("train").get<int64_t>("batch_size", 1);
  }
  Net net(model, Phase::train, batch, s.registry, *s.ctx, &plan_for);
  if (s.root.has("solver")) apply_param_groups(s.root.at("solver"), net);
  out << s.name << " (train phase, batch " << batch << ", on " << plan_for.str() << ")\n"
      << net.summary();
  const ParameterCounts counts = count_parameters(net);
  out << fmt::format("parameters: {} trained, {} frozen (lr_mult 0)\n", counts.trainable,
                     counts.frozen);

  // Training memory: the net's tensors plus the solver's state at the configured batch.
  const Net::Memory m = net.memory();
  int64_t solver_bytes = 0;
  std::string solver_name = "no solver in the config";
  if (s.root.has("solver")) {
    std::unique_ptr<Solver> solver = make_solver(s.root.at("solver"), 1);
    for (const auto& entry : solver->state(net.learnable_params(), *s.ctx)) {
      solver_bytes += int64_t(entry.second.nbytes());
    }
    solver_name = solver->config().type;
  }
  // Kept whole: every activation and its gradient for the whole step (model.memory_plan: false,
  // without the layers' own state). Planned: what the memory plan holds at once (core/net.h).
  const int64_t weights = 2 * m.params + m.buffers + solver_bytes;
  const int64_t whole = weights + 2 * m.activations;
  const int64_t planned = weights + m.kept + m.arena + m.layer_state + m.workspace;
  auto row = [&](const char* what, int64_t bytes, const std::string& note = "") {
    out << fmt::format("  {:<34} {:>12}{}\n", what, mib(bytes),
                       note.empty() ? "" : "  (" + note + ")");
  };
  out << fmt::format("memory to train at batch {} (estimate):\n", batch);
  row("parameters", m.params);
  row("parameter gradients", m.params);
  row("solver state", solver_bytes, solver_name);
  row("buffers", m.buffers);
  row("activations", m.activations);
  row("activation gradients", m.activations);
  out << fmt::format("  kept whole: {}\n", gib(whole));
  if (m.planned) {
    row("values kept whole", m.kept, "inputs, losses, outputs");
    row("arena", m.arena, "every other value and every gradient, reused");
    if (m.view_candidates > 0) {
      row("copies saved by views", m.view_copies_saved,
          fmt::format("a step; {} of {} possible views, model.concat_views", m.views,
                      m.view_candidates));
    }
    row("layers' own state", m.layer_state, "saved inputs, masks, statistics");
    row("shared workspace", m.workspace, "the largest layer's scratch");
    out << fmt::format("  planned peak: {}\n", gib(planned));
  } else {
    out << "  planned peak: no plan (model.memory_plan: false)\n";
  }
  out << "  (kept whole: plus the shared workspace; both: plus the data batches)\n";
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
