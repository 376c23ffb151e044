#include "data/packed.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace crema::data {

PackedDataset::PackedDataset(const std::string& dir, int channels, int64_t max_pixels)
    : dir_(dir), channels_(channels), max_pixels_(max_pixels) {
  const std::string what = "packed dataset '" + dir_ + "'";
  std::error_code error;
  if (!std::filesystem::is_directory(dir_, error)) {
    throw Error(what + " is not a folder (write one with `crema pack SOURCE " + dir_ + "`)");
  }
  if (channels_ != 1 && channels_ != 3) {
    throw Error(what + ": channels is " + std::to_string(channels_) +
                "; images are read as 1 (grayscale) or 3 (RGB) channels");
  }
  index_ = read_pack_index(dir_);
  for (uint32_t s = 0; s < uint32_t(index_.shard_sizes.size()); ++s) {
    shards_.push_back(std::make_unique<RegularFile>(shard_path(s), "shard of " + what));
  }
  const PackedSample& first = index_.samples.front();
  sample_shape_ = {channels_, int64_t(first.height), int64_t(first.width)};
}

std::string PackedDataset::shard_path(uint32_t shard) const {
  return (std::filesystem::path(dir_) / shard_file_name(shard)).string();
}

const PackedSample& PackedDataset::sample(int64_t index) const {
  CREMA_CHECK(index >= 0 && index < size(), dir_ + ": sample index " + std::to_string(index) +
                                                " outside [0, " + std::to_string(size()) + ")");
  return index_.samples[size_t(index)];
}

std::vector<std::string> PackedDataset::class_names() const {
  return index_.named ? index_.class_names : std::vector<std::string>{};
}

void PackedDataset::read_bytes(int64_t index, std::vector<uint8_t>& bytes) const {
  const PackedSample& s = sample(index);
  const RegularFile& shard = *shards_[s.shard];
  bytes.resize(s.length);
  size_t done = 0;
  while (done < s.length) {
    const ssize_t n =
        ::pread(shard.fd(), bytes.data() + done, s.length - done, off_t(s.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw Error(sample_name(index) + ": cannot read it (" + std::strerror(errno) + ")");
    }
    if (n == 0) {
      throw Error(sample_name(index) + " lies at bytes " + std::to_string(s.offset) + " + " +
                  std::to_string(s.length) + ", but the shard ends at byte " +
                  std::to_string(s.offset + done) +
                  ": the shard is truncated; pack the source "
                  "again (or skip_bad: true skips what is lost)");
    }
    done += size_t(n);
  }
  const uint32_t crc = crc32_of(bytes.data(), bytes.size());
  if (crc != s.crc32) {
    throw Error(sample_name(index) + ": its " + std::to_string(s.length) +
                " bytes have the CRC-32 " + std::to_string(crc) + ", the index says " +
                std::to_string(s.crc32) +
                ": the shard is corrupt; pack the source again (or "
                "skip_bad: true skips the sample)");
  }
}

void PackedDataset::read_sample(int64_t index, Image& out) const {
  read_sample_reduced(index, out, {});
}

void PackedDataset::read_sample_reduced(int64_t index, Image& out,
                                        const DecodePlanner& plan) const {
  // One buffer per thread: the loader's workers read concurrently, each one sample at a time.
  thread_local std::vector<uint8_t> bytes;
  read_bytes(index, bytes);
  DecodeOptions options;
  options.max_pixels = max_pixels_;
  options.plan = plan;
  const PackedSample& s = sample(index);
  decode_image(bytes.data(), bytes.size(), channels_, s.path + " in " + shard_path(s.shard), out,
               options);
}

bool PackedDataset::read_encoded(int64_t index, EncodedSample& out) const {
  read_bytes(index, out.bytes);
  const PackedSample& s = sample(index);
  out.channels = channels_;
  out.max_pixels = max_pixels_;
  out.name = s.path + " in " + shard_path(s.shard);
  return true;
}

void PackedDataset::will_read(const int64_t* indices, int64_t count) const {
  // Neighbours in a shard merge into one range; each range is one readahead request.
  for (int64_t i = 0; i < count;) {
    const PackedSample& first = sample(indices[i]);
    uint64_t end = first.offset + first.length;
    int64_t next = i + 1;
    for (; next < count; ++next) {
      const PackedSample& s = sample(indices[next]);
      if (s.shard != first.shard || s.offset != end) break;
      end += s.length;
    }
    ::posix_fadvise(shards_[first.shard]->fd(), off_t(first.offset), off_t(end - first.offset),
                    POSIX_FADV_WILLNEED);
    i = next;
  }
}

int64_t PackedDataset::label(int64_t index) const {
  return sample(index).label;
}

std::string PackedDataset::sample_name(int64_t index) const {
  const PackedSample& s = sample(index);
  return "'" + shard_path(s.shard) + "' sample " + std::to_string(index) + " ('" + s.path + "')";
}

std::string PackedDataset::description() const {
  return "packed dataset '" + dir_ + "' (" + std::to_string(size()) + " images, " +
         std::to_string(num_classes()) + " classes, " + std::to_string(shards_.size()) +
         " shard(s), the first " + shape_str(sample_shape_) + ")";
}

std::unique_ptr<PackedDataset> load_packed(const std::string& dir, int channels,
                                           int64_t max_pixels) {
  return std::make_unique<PackedDataset>(dir, channels, max_pixels);
}

}  // namespace crema::data
