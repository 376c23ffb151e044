#include "data/dataset.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace crema::data {

InMemoryDataset::InMemoryDataset(std::string name, Shape sample_shape, std::vector<uint8_t> pixels,
                                 std::vector<int32_t> labels)
    : name_(std::move(name)),
      sample_shape_(std::move(sample_shape)),
      sample_numel_(shape_numel(sample_shape_)),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)) {
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
    if (labels_[i] < 0) {
      throw Error(name_ + ": sample " + std::to_string(i) + " has the negative label " +
                  std::to_string(labels_[i]));
    }
  }
  if (!labels_.empty())
    num_classes_ = int64_t(*std::max_element(labels_.begin(), labels_.end())) + 1;
}

void InMemoryDataset::check_index(int64_t index) const {
  CREMA_CHECK(index >= 0 && index < size(), name_ + ": sample index " + std::to_string(index) +
                                                " outside [0, " + std::to_string(size()) + ")");
}

void InMemoryDataset::read_sample(int64_t index, float* pixels) const {
  check_index(index);
  const uint8_t* src = pixels_.data() + index * sample_numel_;
  for (int64_t i = 0; i < sample_numel_; ++i) pixels[i] = float(src[i]);
}

int64_t InMemoryDataset::label(int64_t index) const {
  check_index(index);
  return labels_[size_t(index)];
}

std::string InMemoryDataset::description() const {
  return name_ + " (" + std::to_string(size()) + " x " + shape_str(sample_shape_) + ")";
}

}  // namespace crema::data
