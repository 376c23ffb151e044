// Dataset: a fixed, indexable set of labelled samples, the source a DataLoader draws batches from.
//
// A sample is an array of `sample_shape()` pixels, C x H x W for images (Fashion-MNIST: 1 x 28 x
// 28), handed out as float in the file's own units (0..255 for uint8 images) before any
// transform, and an integer class label. Reads are const and must be safe to call from several
// loader threads at once; a format whose reader keeps state (a file cursor) locks inside.
//
// To add a format (CIFAR binary, an image folder): write a loader function that returns a
// Dataset, an InMemoryDataset when the decoded set fits in memory (see data/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace crema::data {

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of samples; indices run over [0, size()).
  virtual int64_t size() const = 0;
  // Shape of one sample without the batch axis, e.g. {1, 28, 28}.
  virtual const Shape& sample_shape() const = 0;
  // Number of classes (labels lie in [0, num_classes())), or 0 when unknown.
  virtual int64_t num_classes() const = 0;
  // Writes sample `index`'s shape_numel(sample_shape()) pixels to `pixels`, untransformed.
  virtual void read_sample(int64_t index, float* pixels) const = 0;
  // The class label of sample `index`.
  virtual int64_t label(int64_t index) const = 0;
  // What the set is, for logs and messages: "train-images-idx3-ubyte.gz (60000 x [1, 28, 28])".
  virtual std::string description() const = 0;

  int64_t sample_numel() const { return shape_numel(sample_shape()); }
};

// A dataset decoded into memory as uint8 pixels (Fashion-MNIST's 60,000 x 784 bytes is 47 MB).
class InMemoryDataset : public Dataset {
 public:
  // pixels: [N, sample_shape...] row-major, N = labels.size(). Throws crema::Error naming `name`
  // when the pixel count is not N times the sample size. num_classes is max(label) + 1.
  InMemoryDataset(std::string name, Shape sample_shape, std::vector<uint8_t> pixels,
                  std::vector<int32_t> labels);

  int64_t size() const override { return int64_t(labels_.size()); }
  const Shape& sample_shape() const override { return sample_shape_; }
  int64_t num_classes() const override { return num_classes_; }
  void read_sample(int64_t index, float* pixels) const override;
  int64_t label(int64_t index) const override;
  std::string description() const override;

 private:
  void check_index(int64_t index) const;

  std::string name_;
  Shape sample_shape_;
  int64_t sample_numel_ = 0;
  std::vector<uint8_t> pixels_;  // [N, sample_shape...]
  std::vector<int32_t> labels_;  // [N]
  int64_t num_classes_ = 0;
};

}  // namespace crema::data
