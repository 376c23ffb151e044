// Dataset: a fixed, indexable set of labelled samples, the source a DataLoader draws batches from.
//
// A sample is an Image (data/image.h): planar floats of some shape, C x H x W for images
// (Fashion-MNIST: 1 x 28 x 28), in the file's own units (0..255 for 8-bit images) before any
// transform, and an integer class label. Reads are const and must be safe to call from several
// loader threads at once; a format whose reader keeps state (a file cursor) locks inside.
//
// Two kinds of source implement it: InMemoryDataset, decoded once into memory (IDX, CIFAR), and
// ImageFileDataset (data/image_files.h), which decodes each file when it is read, in the
// loader's workers, so a folder of photos may be larger than memory. select_classes() keeps some
// classes of any dataset and numbers them anew. To add a format, see data/README.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/shape.h"
#include "data/image.h"

namespace crema::data {

struct EncodedSample {
  std::vector<uint8_t> bytes;
  int channels = 3;
  int64_t max_pixels = kDefaultMaxImagePixels;
  std::string name;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of samples; indices run over [0, size()).
  virtual int64_t size() const = 0;
  // Shape of one sample without the batch axis, e.g. {1, 28, 28}. Image files may differ in
  // size; theirs is the first file's, and the loader's transforms (resize, crops) must bring
  // every sample to one shape.
  virtual const Shape& sample_shape() const = 0;
  // Number of classes (labels lie in [0, num_classes())), or 0 when unknown.
  virtual int64_t num_classes() const = 0;
  // The class names in label order when the source has them (an image folder's subfolders),
  // otherwise empty.
  virtual std::vector<std::string> class_names() const { return {}; }
  // Reads sample `index`, untransformed, into `out` (its shape and pixels). Throws
  // crema::Error naming the file for a sample that cannot be read.
  virtual void read_sample(int64_t index, Image& out) const = 0;
  // read_sample, letting the decoder produce only what `plan(file's size)` asks for (a reduction
  // of 1, 2, 4 or 8 and a window; data/image.h DecodePlan): sources that decode JPEG files do so,
  // the others read the sample as it is (the default).
  virtual void read_sample_reduced(int64_t index, Image& out, const DecodePlanner& plan) const {
    read_sample(index, out);
  }
  // The encoded file of sample `index` (its bytes, the channels and pixel limit it decodes
  // with, its name for messages), for a decoder outside the dataset (decode: gpu): false for a
  // source of decoded pixels (the default). Throws crema::Error naming the file when it cannot
  // be read.
  virtual bool read_encoded(int64_t index, EncodedSample& out) const { return false; }
  // A hint that samples `indices[0..count)` (a batch) are read next: a source that reads files
  // may start reading them ahead (data/packed.h). The default does nothing.
  virtual void will_read(const int64_t* indices, int64_t count) const {}
  // The class label of sample `index`.
  virtual int64_t label(int64_t index) const = 0;
  // What sample `index` is, for messages: its file, or "<description> sample <index>".
  virtual std::string sample_name(int64_t index) const;
  // What the set is, for logs and messages: "train-images-idx3-ubyte.gz (60000 x [1, 28, 28])".
  virtual std::string description() const = 0;

  int64_t sample_numel() const { return shape_numel(sample_shape()); }
};

// A dataset decoded into memory as uint8 pixels (Fashion-MNIST's 60,000 x 784 bytes is 47 MB).
class InMemoryDataset : public Dataset {
 public:
  // pixels: [N, sample_shape...] row-major, N = labels.size(). Throws crema::Error naming `name`
  // when the pixel count is not N times the sample size, or a label is negative or not below
  // class_names.size(). num_classes is class_names.size(), or max(label) + 1 without names.
  InMemoryDataset(std::string name, Shape sample_shape, std::vector<uint8_t> pixels,
                  std::vector<int32_t> labels, std::vector<std::string> class_names = {});

  int64_t size() const override { return int64_t(labels_.size()); }
  const Shape& sample_shape() const override { return sample_shape_; }
  int64_t num_classes() const override { return num_classes_; }
  std::vector<std::string> class_names() const override { return class_names_; }
  void read_sample(int64_t index, Image& out) const override;
  int64_t label(int64_t index) const override;
  std::string description() const override;

 private:
  void check_index(int64_t index) const;

  std::string name_;
  Shape sample_shape_;
  int64_t sample_numel_ = 0;
  std::vector<uint8_t> pixels_;  // [N, sample_shape...]
  std::vector<int32_t> labels_;  // [N]
  std::vector<std::string> class_names_;
  int64_t num_classes_ = 0;
};

// The samples of `dataset` whose label is one of `classes`, in their order, relabelled by
// position in `classes`: {5, 7, 9} keeps Fashion-MNIST's footwear as 5 -> 0, 7 -> 1, 9 -> 2.
// Class names follow (the kept ones, or the old labels as text). Throws crema::Error for an
// empty list, a repeated class, a class outside [0, num_classes()), or one with no sample.
std::unique_ptr<Dataset> select_classes(std::shared_ptr<const Dataset> dataset,
                                        const std::vector<int64_t>& classes);

// The class list of a dataset: its class names in label order, or the labels as numbers
// ("0", "1", ...) when it has no names. A training run keeps its train source's list
// (`classes.txt`, and in every checkpoint), so that label k can be read back as a name and a test
// source is checked against it.
std::vector<std::string> class_list(const Dataset& dataset);
// The same list as text, one name per line (the `classes.txt` of a run).
std::string class_names_text(const Dataset& dataset);

// `dataset` with each sample labelled by its class name's position in `classes` (a training run's
// list): a validation folder that lacks one of the training classes keeps the training labels
// instead of shifting them. Every class name of `dataset` must be in `classes`; throws
// crema::Error naming the first that is not.
std::unique_ptr<Dataset> relabel_by_name(std::shared_ptr<const Dataset> dataset,
                                         const std::vector<std::string>& classes);

}  // namespace crema::data
