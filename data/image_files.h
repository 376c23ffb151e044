// Datasets of image files, decoded when read (in the loader's workers), never all up front: a
// folder of photos may be larger than memory.
//
//   image folder (ImageNet / torchvision ImageFolder layout):
//     root/<class>/<...>/<image>    one subfolder per class; class c is the c-th subfolder name
//                                   in sorted (byte) order; files under it, at any depth, in
//                                   sorted path order; names starting with '.' are skipped
//   list file (Caffe's ImageData):
//     <path> <label>                one sample per line, in file order; the path is everything
//                                   before the last blank, relative to `root`; blank lines and
//                                   lines starting with '#' are skipped
//
// Image files are those crema decodes, by extension (case-insensitive): .png .jpg .jpeg .bmp
// .gif .tga .psd .hdr .pic .ppm .pgm .pnm; other files in a class folder are ignored (the decoder
// then goes by the file's bytes, data/image.h). Each image
// is decoded with `channels` channels (1: grayscale, 3: RGB) whatever the file holds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace crema::data {

struct ImageFile {
  std::string path;
  int32_t label = 0;
  std::string origin;  // where the file was named, for messages ("train.txt:17"), or empty
};

class ImageFileDataset : public Dataset {
 public:
  // Takes the sample shape from the header of the first file that has a readable one (trying up
  // to 16); throws crema::Error naming `name` for an empty list, and the first file's error when
  // none of them is readable.
  // Images above `max_pixels` (width x height) are refused as decompression bombs.
  ImageFileDataset(std::string name, std::vector<ImageFile> files,
                   std::vector<std::string> class_names, int64_t num_classes, int channels,
                   int64_t max_pixels = kDefaultMaxImagePixels);

  int64_t size() const override { return int64_t(files_.size()); }
  const Shape& sample_shape() const override { return sample_shape_; }
  int64_t num_classes() const override { return num_classes_; }
  std::vector<std::string> class_names() const override { return class_names_; }
  // Decodes the file; errors name it (and its list line).
  void read_sample(int64_t index, Image& out) const override;
  void read_sample_reduced(int64_t index, Image& out, const DecodePlanner& plan) const override;
  bool read_encoded(int64_t index, EncodedSample& out) const override;
  int64_t label(int64_t index) const override;
  std::string sample_name(int64_t index) const override;
  std::string description() const override;
  const ImageFile& file(int64_t index) const;

 private:
  std::string name_;
  std::vector<ImageFile> files_;
  std::vector<std::string> class_names_;
  int64_t num_classes_ = 0;
  int channels_ = 3;
  int64_t max_pixels_ = kDefaultMaxImagePixels;
  Shape sample_shape_;
};

// The folder `root` as described above. Throws crema::Error naming the folder when it is
// missing, has no class subfolders, or a class subfolder holds no image file.
std::unique_ptr<ImageFileDataset> load_image_folder(const std::string& root, int channels,
                                                    int64_t max_pixels = kDefaultMaxImagePixels);

// The list file `list_path` as described above; relative paths are taken from `root` (empty:
// the list file's folder). `num_classes` > 0 bounds the labels (otherwise the largest label
// + 1). Throws crema::Error naming the list file and line for a line without a label, a label
// that is not a whole number, negative, or not below num_classes, and for an empty list.
// Files are not opened here: a missing one is reported, with its line, when it is read.
std::unique_ptr<ImageFileDataset> load_image_list(const std::string& list_path,
                                                  const std::string& root, int channels,
                                                  int64_t num_classes = 0,
                                                  int64_t max_pixels = kDefaultMaxImagePixels);

}  // namespace crema::data
