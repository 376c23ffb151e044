#include "data/dataset.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "core/error.h"

namespace crema::data {
namespace {

// A view of some classes of another dataset, renumbered (select_classes).
class ClassSubsetDataset : public Dataset {
 public:
  ClassSubsetDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices,
                     std::vector<int32_t> labels, std::vector<std::string> class_names,
                     std::string classes_text)
      : base_(std::move(base)),
        indices_(std::move(indices)),
        labels_(std::move(labels)),
        class_names_(std::move(class_names)),
        classes_text_(std::move(classes_text)) {}

  int64_t size() const override { return int64_t(indices_.size()); }
  const Shape& sample_shape() const override { return base_->sample_shape(); }
  int64_t num_classes() const override { return int64_t(class_names_.size()); }
  std::vector<std::string> class_names() const override { return class_names_; }
  void read_sample(int64_t index, Image& out) const override {
    base_->read_sample(base_index(index), out);
  }
  void read_sample_reduced(int64_t index, Image& out, const DecodePlanner& plan) const override {
    base_->read_sample_reduced(base_index(index), out, plan);
  }
  bool read_encoded(int64_t index, EncodedSample& out) const override {
    return base_->read_encoded(base_index(index), out);
  }
  void will_read(const int64_t* indices, int64_t count) const override {
    std::vector<int64_t> base(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) base[size_t(i)] = base_index(indices[i]);
    base_->will_read(base.data(), count);
  }
  int64_t label(int64_t index) const override { return labels_[size_t(check(index))]; }
  std::string sample_name(int64_t index) const override {
    return base_->sample_name(base_index(index));
  }
  std::string description() const override {
    return base_->description() + " classes " + classes_text_ + " (" + std::to_string(size()) +
           " samples)";
  }

 private:
  int64_t check(int64_t index) const {
    CREMA_CHECK(index >= 0 && index < size(), "class subset: sample index " +
                                                  std::to_string(index) + " outside [0, " +
                                                  std::to_string(size()) + ")");
    return index;
  }
  int64_t base_index(int64_t index) const { return indices_[size_t(check(index))]; }

  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;  // [size] index in base_
  std::vector<int32_t> labels_;   // [size] the new labels
  std::vector<std::string> class_names_;
  std::string classes_text_;
};

}  // namespace

std::string Dataset::sample_name(int64_t index) const {
  return description() + " sample " + std::to_string(index);
}

InMemoryDataset::InMemoryDataset(std::string name, Shape sample_shape, std::vector<uint8_t> pixels,
                                 std::vector<int32_t> labels, std::vector<std::string> class_names)
    : name_(std::move(name)),
      sample_shape_(std::move(sample_shape)),
      sample_numel_(shape_numel(sample_shape_)),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      class_names_(std::move(class_names)) {
  for (int64_t extent : sample_shape_) {
    if (extent <= 0) {
      throw Error(name_ + ": sample shape " + shape_str(sample_shape_) +
                  " has an empty axis; every extent must be positive");
    }
  }
  const uint64_t expected = uint64_t(labels_.size()) * uint64_t(sample_numel_);
  if (pixels_.size() != expected) {
    throw Error(name_ + ": " + std::to_string(pixels_.size()) + " pixels for " +
                std::to_string(labels_.size()) + " samples of " + shape_str(sample_shape_) +
                "; expected " + std::to_string(expected));
  }
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] < 0 || (!class_names_.empty() && size_t(labels_[i]) >= class_names_.size())) {
      throw Error(name_ + ": sample " + std::to_string(i) + " has the label " +
                  std::to_string(labels_[i]) + ", outside the " +
                  (class_names_.empty() ? std::string("non-negative numbers")
                                        : std::to_string(class_names_.size()) + " classes"));
    }
  }
  if (!class_names_.empty()) {
    num_classes_ = int64_t(class_names_.size());
  } else if (!labels_.empty()) {
    num_classes_ = int64_t(*std::max_element(labels_.begin(), labels_.end())) + 1;
  }
}

void InMemoryDataset::check_index(int64_t index) const {
  CREMA_CHECK(index >= 0 && index < size(), name_ + ": sample index " + std::to_string(index) +
                                                " outside [0, " + std::to_string(size()) + ")");
}

void InMemoryDataset::read_sample(int64_t index, Image& out) const {
  check_index(index);
  out.reset(sample_shape_);
  const uint8_t* src = pixels_.data() + index * sample_numel_;
  float* dst = out.pixels.data();
  for (int64_t i = 0; i < sample_numel_; ++i) dst[i] = float(src[i]);
}

int64_t InMemoryDataset::label(int64_t index) const {
  check_index(index);
  return labels_[size_t(index)];
}

std::string InMemoryDataset::description() const {
  return name_ + " (" + std::to_string(size()) + " x " + shape_str(sample_shape_) + ")";
}

std::unique_ptr<Dataset> select_classes(std::shared_ptr<const Dataset> dataset,
                                        const std::vector<int64_t>& classes) {
  CREMA_CHECK(dataset != nullptr, "select_classes needs a dataset");
  std::string text = "[";
  for (size_t i = 0; i < classes.size(); ++i) text += (i ? ", " : "") + std::to_string(classes[i]);
  text += "]";
  const std::string what = dataset->description() + ": classes " + text;
  if (classes.empty()) throw Error(what + ": the list is empty; name at least one class");
  const int64_t known = dataset->num_classes();
  std::unordered_map<int64_t, int32_t> new_label;  // old label -> position in `classes`
  for (size_t i = 0; i < classes.size(); ++i) {
    if (classes[i] < 0 || (known > 0 && classes[i] >= known)) {
      throw Error(what + ": " + std::to_string(classes[i]) + " is not a class (the labels are 0.." +
                  std::to_string(known - 1) + ")");
    }
    if (!new_label.emplace(classes[i], int32_t(i)).second) {
      throw Error(what + ": " + std::to_string(classes[i]) + " is listed twice");
    }
  }
  std::vector<int64_t> indices;
  std::vector<int32_t> labels;
  std::vector<int64_t> counts(classes.size(), 0);
  for (int64_t i = 0; i < dataset->size(); ++i) {
    const auto found = new_label.find(dataset->label(i));
    if (found == new_label.end()) continue;
    indices.push_back(i);
    labels.push_back(found->second);
    ++counts[size_t(found->second)];
  }
  for (size_t i = 0; i < classes.size(); ++i) {
    if (counts[i] == 0)
      throw Error(what + ": class " + std::to_string(classes[i]) + " has no sample");
  }
  const std::vector<std::string> old_names = dataset->class_names();
  std::vector<std::string> names;
  for (int64_t c : classes) {
    names.push_back(size_t(c) < old_names.size() ? old_names[size_t(c)] : std::to_string(c));
  }
  return std::make_unique<ClassSubsetDataset>(std::move(dataset), std::move(indices),
                                              std::move(labels), std::move(names), text);
}

std::vector<std::string> class_list(const Dataset& dataset) {
  const std::vector<std::string> names = dataset.class_names();
  std::vector<std::string> list;
  for (int64_t c = 0; c < dataset.num_classes(); ++c) {
    list.push_back(size_t(c) < names.size() ? names[size_t(c)] : std::to_string(c));
  }
  return list;
}

std::string class_names_text(const Dataset& dataset) {
  std::string text;
  for (const std::string& name : class_list(dataset)) text += name + "\n";
  return text;
}

std::unique_ptr<Dataset> relabel_by_name(std::shared_ptr<const Dataset> dataset,
                                         const std::vector<std::string>& classes) {
  CREMA_CHECK(dataset != nullptr, "relabel_by_name needs a dataset");
  std::vector<int32_t> position;  // the dataset's label -> its name's position in `classes`
  for (const std::string& name : class_list(*dataset)) {
    const auto found = std::find(classes.begin(), classes.end(), name);
    if (found == classes.end()) {
      throw Error(dataset->description() + ": class '" + name + "' is not one of the " +
                  std::to_string(classes.size()) + " classes it is labelled by");
    }
    position.push_back(int32_t(found - classes.begin()));
  }
  std::vector<int64_t> indices(size_t(dataset->size()));
  std::vector<int32_t> labels(indices.size());
  for (int64_t i = 0; i < dataset->size(); ++i) {
    indices[size_t(i)] = i;
    labels[size_t(i)] = position[size_t(dataset->label(i))];
  }
  return std::make_unique<ClassSubsetDataset>(std::move(dataset), std::move(indices),
                                              std::move(labels), classes, "by name");
}

}  // namespace crema::data
