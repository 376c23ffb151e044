// PackedDataset: the samples of a packed dataset (written by `crema pack`; the folder's format
// is in data/packed_index.h), decoded when read, as ImageFileDataset decodes its files.
//
// Why pack: a folder of a million photos costs an open(), a stat and a small read per sample,
// scattered over the disk; a few large shard files cost one pread per sample from descriptors
// opened once, and the samples of a batch that are neighbours in the shard (sample order, or a
// loader without shuffle) are one sequential range: will_read() hands each batch's ranges to the
// kernel (posix_fadvise WILLNEED), which reads them ahead in large requests while the worker
// decodes, and a shuffled batch's samples are fetched all at once rather than one after another.
//
// A sample reads as the file it was packed from would: the same bytes (unless `crema pack
// --max-side` re-encoded it) through the same decoders (data/image.h), at the same reduced scale
// the first transform asks for. So a packed folder gives the same batches as the folder, bit for
// bit, for the same seed (tests/data/packed_test.cpp).
//
// Untrusted files: the index is checked as packed_index.h says; a missing shard is an error when
// the dataset opens; a sample past the end of a truncated shard, or whose bytes do not match
// their CRC-32, is an error naming the shard, the sample and its source file when it is read
// (the loader's skip_bad skips it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/regular_file.h"
#include "data/dataset.h"
#include "data/packed_index.h"

namespace crema::data {

class PackedDataset : public Dataset {
 public:
  // Reads DIR/index.crema and opens every shard. Each image is decoded with `channels` (1 or 3);
  // images above `max_pixels` are refused as decompression bombs.
  PackedDataset(const std::string& dir, int channels, int64_t max_pixels = kDefaultMaxImagePixels);

  int64_t size() const override { return int64_t(index_.samples.size()); }
  const Shape& sample_shape() const override { return sample_shape_; }
  int64_t num_classes() const override { return int64_t(index_.class_names.size()); }
  std::vector<std::string> class_names() const override;
  void read_sample(int64_t index, Image& out) const override;
  void read_sample_reduced(int64_t index, Image& out, const DecodePlanner& plan) const override;
  bool read_encoded(int64_t index, EncodedSample& out) const override;
  void will_read(const int64_t* indices, int64_t count) const override;
  int64_t label(int64_t index) const override;
  std::string sample_name(int64_t index) const override;
  std::string description() const override;

  const PackedIndex& index() const { return index_; }
  // The encoded bytes of sample `index`, read and checked against their CRC-32.
  void read_bytes(int64_t index, std::vector<uint8_t>& bytes) const;

 private:
  const PackedSample& sample(int64_t index) const;
  std::string shard_path(uint32_t shard) const;

  std::string dir_;
  PackedIndex index_;
  std::vector<std::unique_ptr<RegularFile>> shards_;  // [S], opened once, read with pread
  int channels_ = 3;
  int64_t max_pixels_ = kDefaultMaxImagePixels;
  Shape sample_shape_;
};

std::unique_ptr<PackedDataset> load_packed(const std::string& dir, int channels,
                                           int64_t max_pixels = kDefaultMaxImagePixels);

}  // namespace crema::data
