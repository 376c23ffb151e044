// IDX files, the format MNIST and Fashion-MNIST ship in (http://yann.lecun.com/exdb/mnist/).
//
//   bytes 0-1   0x00 0x00
//   byte  2     element type: 0x08 uint8 (the only one crema reads), 0x09 int8, 0x0B int16,
//               0x0C int32, 0x0D float32, 0x0E float64
//   byte  3     number of dimensions D
//   then        D extents, each a big-endian uint32, outermost first
//   then        the elements, row-major (for uint8: one byte each)
//
// So images are magic 0x00000803 ([N, H, W]) and labels 0x00000801 ([N]). Files are read through
// zlib's gzread, which reads gzip-compressed ("*.gz") and plain files alike. Only regular files
// are opened (a FIFO or /dev/zero is refused), and the bytes a header promises are compared with
// what the file can hold (its size; for gzip its size x 1032, deflate's largest ratio) before
// anything is allocated. The whole file is read into memory when the dataset is loaded, so a
// file changed or truncated on disk during training does not affect the run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/shape.h"
#include "data/dataset.h"

namespace crema::data {

// The contents of one uint8 IDX file.
struct IdxArray {
  Shape dims;                   // the D extents of the header
  std::vector<uint8_t> values;  // [dims...] row-major
};

// Reads one IDX file of element type uint8. Throws crema::Error naming `path` when the file is
// missing or unreadable, is not IDX (magic printed in hex), has another element type, is
// truncated (bytes expected and present) or carries bytes after the data.
IdxArray read_idx(const std::string& path);

// An image set from an images file ([N, H, W] -> samples {1, H, W}; [N, C, H, W] -> {C, H, W})
// and a labels file ([N]). Throws crema::Error naming both paths when the counts differ.
// Label values are taken as they are; range checks belong to the loss that consumes them.
std::unique_ptr<Dataset> load_idx_dataset(const std::string& images_path,
                                          const std::string& labels_path);

}  // namespace crema::data
