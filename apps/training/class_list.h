// The class list of a run: which name label k stands for.
//
// A training run takes its list from the train source (data::class_list: an image folder's
// subfolder names in sorted order, the names `classes:` picked, or "0", "1", ... for a source
// without names) and keeps it twice: `<run>/classes.txt`, one name per line, and the `classes`
// of every checkpoint's state.json. The list is the run's label space: label k is the k-th name.
//
// Then (lists of names only: a source without class names, whose list is its labels as numbers,
// is taken as it is):
//   - a test source (data.test, `crema test`) is labelled by it: its class names are looked up in
//     the list, so a validation folder that lacks a class keeps the training labels instead of
//     shifting them; a class the list lacks is refused, naming both lists;
//   - `--resume` refuses a train source whose list is not the checkpoint's;
//   - `--weights` that copies the classifier (the layer the SoftmaxWithLoss scores) refuses a
//     train source with as many classes as the weights' list but another list: the copied outputs
//     would mean other classes. A new head (renamed, or of another size) is the usual fine-tuning
//     case and passes;
//   - `crema predict` prints the names.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace crema {

// A class list and where it came from ("the train source", "runs/x/classes.txt"), for messages.
struct ClassList {
  std::vector<std::string> names;
  std::string origin;
};

// Reads a class file: one name per line in label order (trailing spaces and a final newline
// ignored). Throws crema::Error naming the file when it cannot be read, is empty, is larger than
// a class file can be (16 MiB), or names a class twice.
ClassList read_class_file(const std::string& path);

// The list kept with the weights file `weights`: the `classes` of state.json in its directory (a
// checkpoint's model.safetensors), else the first classes.txt in its directory or the two above
// (<run>/final.safetensors, <run>/checkpoints/iter_N/model.safetensors). Empty names when none.
ClassList classes_of_weights(const std::string& weights);

// "[cat, dog, fox]" for messages (long lists shortened in the middle).
std::string list_text(const std::vector<std::string>& names);

// `source` labelled by `trained` (see above): itself when its list is the same or either list is
// only numbers, relabelled by name when each of its classes is in `trained`, else crema::Error
// naming both lists.
std::shared_ptr<const data::Dataset> align_classes(std::shared_ptr<const data::Dataset> source,
                                                   const ClassList& trained);

// --weights that copied the classifier: throws crema::Error when `weights` and `train` have as
// many classes but other lists.
void check_finetune_classes(const ClassList& weights, const ClassList& train);

}  // namespace crema
