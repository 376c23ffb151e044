#include "data/packed_index.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/regular_file.h"

namespace crema::data {
namespace {

constexpr char kMagic[8] = {'C', 'R', 'E', 'M', 'A', 'P', 'A', 'K'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kRecordBytes = 4 + 4 + 8 + 4 + 4 + 4 + 4 + 4;  // with an empty path
constexpr uint64_t kStringBytes = 4;                              // an empty string

void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out += char((value >> (8 * i)) & 0xFF);
}

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += char((value >> (8 * i)) & 0xFF);
}

void put_string(std::string& out, const std::string& text) {
  put_u32(out, uint32_t(text.size()));
  out += text;
}

// Reads the format's fields in order, each checked against the bytes left.
class Reader {
 public:
  Reader(const uint8_t* bytes, size_t size, const std::string& name)
      : bytes_(bytes), size_(size), name_(name) {}

  uint64_t left() const { return size_ - at_; }
  size_t at() const { return at_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("packed dataset index '" + name_ + "': " + what);
  }
  uint64_t unsigned_le(int count, const char* field) {
    if (left() < uint64_t(count)) {
      fail("truncated: " + std::string(field) + " at byte " + std::to_string(at_) + " needs " +
           std::to_string(count) + " bytes, " + std::to_string(left()) + " left");
    }
    uint64_t value = 0;
    for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes_[at_ + size_t(i)];
    at_ += size_t(count);
    return value;
  }
  uint32_t u32(const char* field) { return uint32_t(unsigned_le(4, field)); }
  uint64_t u64(const char* field) { return unsigned_le(8, field); }
  std::string string(const char* field) {
    const uint32_t length = u32(field);
    if (length > left()) {
      fail("truncated: " + std::string(field) + " at byte " + std::to_string(at_) + " is " +
           std::to_string(length) + " bytes, " + std::to_string(left()) + " left");
    }
    std::string text(reinterpret_cast<const char*>(bytes_ + at_), length);
    at_ += length;
    return text;
  }
  // Fails unless `count` items of at least `each` bytes fit in what is left.
  void check_count(uint64_t count, uint64_t each, const char* what) const {
    if (count > left() / each) {
      fail("the header promises " + std::to_string(count) + " " + what + " of at least " +
           std::to_string(each) + " bytes each, but only " + std::to_string(left()) +
           " bytes follow: a corrupt or truncated index");
    }
  }

 private:
  const uint8_t* bytes_;
  size_t size_;
  size_t at_ = 0;
  const std::string& name_;
};

}  // namespace

std::string shard_file_name(size_t shard) {
  std::string digits = std::to_string(shard);
  if (digits.size() < 5) digits.insert(0, 5 - digits.size(), '0');
  return "shard-" + digits + ".bin";
}

uint32_t crc32_of(const void* bytes, size_t size) {
  // zlib takes lengths as uInt; feed it in pieces that fit.
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(bytes);
  while (size > 0) {
    const uInt piece = uInt(std::min<size_t>(size, 1u << 30));
    crc = ::crc32(crc, p, piece);
    p += piece;
    size -= piece;
  }
  return uint32_t(crc);
}

std::string encode_pack_index(const PackedIndex& index) {
  std::string out(kMagic, sizeof(kMagic));
  put_u32(out, kVersion);
  put_u32(out, uint32_t(index.shard_sizes.size()));
  put_u64(out, uint64_t(index.samples.size()));
  put_u32(out, uint32_t(index.class_names.size()));
  put_u32(out, index.named ? 1 : 0);
  for (uint64_t size : index.shard_sizes) put_u64(out, size);
  for (const std::string& name : index.class_names) put_string(out, name);
  for (const PackedSample& s : index.samples) {
    put_u32(out, s.shard);
    put_u32(out, uint32_t(s.label));
    put_u64(out, s.offset);
    put_u32(out, s.length);
    put_u32(out, s.crc32);
    put_u32(out, s.height);
    put_u32(out, s.width);
    put_string(out, s.path);
  }
  put_u32(out, crc32_of(out.data(), out.size()));
  return out;
}

PackedIndex parse_pack_index(const uint8_t* bytes, size_t size, const std::string& name) {
  Reader in(bytes, size, name);
  if (size < sizeof(kMagic) || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0) {
    in.fail(
        "not a packed dataset index (its first bytes are not \"CREMAPAK\"); write one with "
        "`crema pack`");
  }
  in.unsigned_le(sizeof(kMagic), "magic");
  const uint32_t version = in.u32("version");
  if (version != kVersion) {
    in.fail("format version " + std::to_string(version) + ", this crema reads version " +
            std::to_string(kVersion));
  }
  const uint32_t shards = in.u32("shard count");
  const uint64_t samples = in.u64("sample count");
  const uint32_t classes = in.u32("class count");
  const uint32_t named = in.u32("named");
  if (named > 1) in.fail("the 'named' field is " + std::to_string(named) + ", not 0 or 1");
  if (samples == 0) in.fail("it holds no sample");

  PackedIndex index;
  index.named = named == 1;
  in.check_count(shards, 8, "shard sizes");
  index.shard_sizes.resize(shards);
  for (uint64_t& shard_size : index.shard_sizes) shard_size = in.u64("a shard size");
  in.check_count(classes, kStringBytes, "class names");
  index.class_names.resize(classes);
  for (std::string& class_name : index.class_names) class_name = in.string("a class name");
  in.check_count(samples, kRecordBytes, "sample records");
  index.samples.resize(size_t(samples));
  for (uint64_t i = 0; i < samples; ++i) {
    PackedSample& s = index.samples[size_t(i)];
    s.shard = in.u32("a sample's shard");
    const uint32_t label = in.u32("a sample's label");
    s.offset = in.u64("a sample's offset");
    s.length = in.u32("a sample's length");
    s.crc32 = in.u32("a sample's crc32");
    s.height = in.u32("a sample's height");
    s.width = in.u32("a sample's width");
    s.path = in.string("a sample's path");
    const std::string sample = "sample " + std::to_string(i) + " ('" + s.path + "')";
    if (s.shard >= shards) {
      in.fail(sample + " names shard " + std::to_string(s.shard) + " of " + std::to_string(shards));
    }
    if (label >= classes) {
      in.fail(sample + " has the label " + std::to_string(label) + ", outside the " +
              std::to_string(classes) + " classes");
    }
    s.label = int32_t(label);
    const uint64_t shard_size = index.shard_sizes[s.shard];
    if (s.length == 0 || s.offset > shard_size || s.length > shard_size - s.offset) {
      in.fail(sample + " lies at bytes " + std::to_string(s.offset) + " + " +
              std::to_string(s.length) + ", outside " + shard_file_name(s.shard) + "'s " +
              std::to_string(shard_size) + " bytes");
    }
    if (s.height == 0 || s.width == 0) {
      in.fail(sample + " is " + std::to_string(s.height) + " x " + std::to_string(s.width) +
              " pixels");
    }
  }
  const size_t covered = in.at();
  const uint32_t stored_crc = in.u32("the index's crc32");
  if (in.left() != 0) {
    in.fail(std::to_string(in.left()) + " bytes after the end of the index");
  }
  const uint32_t crc = crc32_of(bytes, covered);
  if (crc != stored_crc) {
    in.fail("its CRC-32 is " + std::to_string(crc) + ", the index says " +
            std::to_string(stored_crc) + ": the file is corrupt; pack the source again");
  }
  return index;
}

PackedIndex read_pack_index(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kPackIndexName).string();
  const std::string bytes =
      read_small_file(path, "packed dataset index", std::numeric_limits<uint64_t>::max() / 2);
  return parse_pack_index(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

}  // namespace crema::data
