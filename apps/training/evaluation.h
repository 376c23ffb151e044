// The test pass, shared by `crema train` (every solver.test_interval) and `crema test`, and the
// checks that a net and its loader fit together.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/training/checkpoint.h"
#include "apps/training/train_settings.h"
#include "core/config.h"
#include "core/context.h"
#include "core/net.h"
#include "data/loader.h"

namespace crema {

// Checks that the net declares the inputs `data` and `label` and that `data` has the shape of the
// loader's samples (the error points at model.inputs), and, before any step, that every
// SoftmaxWithLoss and Accuracy reading `label` scores at least as many classes as the source has
// (the error names the layer, the layer producing its scores, and the source).
void check_inputs(Net& net, const data::DataLoader& loader, const ConfigNode& model);

// The classifier: the layer whose output the net's first SoftmaxWithLoss scores ("" when none).
std::string classifier_of(Net& net);

// Loads every parameter and buffer of `net` from `weights` by name (copy_weights_by_name); a
// tensor the file lacks (but optional buffers such as num_batches_tracked) is an error listing
// them: crema test, predict and export use what the file holds, never a filler. Returns the
// load's notes ("converted 12 bf16 tensors to f32"; "" when none).
std::string load_all_weights(Net& net, const std::string& weights);

// One pass over the whole test set; each output (accuracy, loss) is averaged over samples.
// `after_batch`, when given, runs after each batch's forward (to read blobs out).
std::vector<std::pair<std::string, double>> run_test(
    Net& net, data::DataLoader& loader, Context& ctx,
    const std::function<void(Net&)>& after_batch = nullptr);

// "accuracy=0.9085 loss=0.2681"
std::string format_outputs(const std::vector<std::pair<std::string, double>>& outputs);

// With solver.keep_best, takes the test results of iteration `done` into `best` when its metric
// is better than the best so far (higher for keep_best_mode max, else lower).
void update_best(std::optional<BestMetric>& best, const LoopSettings& loop,
                 const std::vector<std::pair<std::string, double>>& results, int64_t done);

}  // namespace crema
