#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/regular_file.h"

namespace crema::data {
namespace {

constexpr int kTypeUint8 = 0x08;
// Refuse headers that promise more than this many elements: a corrupt header should give a
// message, not an attempt to allocate terabytes.
constexpr uint64_t kMaxElements = uint64_t(1) << 40;
constexpr uint64_t kMaxGzipRatio = 1032;

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof(text), "0x%08X", value);
  return text;
}

const char* idx_type_name(int type) {
  switch (type) {
    case 0x08:
      return "uint8";
    case 0x09:
      return "int8";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

// What a reader accepts, for messages: "0x00000803 (uint8, 3 dims) or 0x00000804 (uint8, 4
// dims)" after `role` ("images"), or any uint8 magic when `ndims` is empty.
std::string expected_magics(const std::vector<int>& ndims, const std::string& role) {
  if (ndims.empty()) return "0x000008DD (uint8, DD dims), e.g. 0x00000803 for images";
  std::string text = role.empty() ? "" : role + " ";
  for (size_t i = 0; i < ndims.size(); ++i) {
    if (i > 0) text += " or ";
    text += hex32(uint32_t(kTypeUint8 << 8 | ndims[i])) + " (uint8, " + std::to_string(ndims[i]) +
            " dims)";
  }
  return text;
}

// An open gzFile that closes itself; read() fills as much of a buffer as the file holds.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    RegularFile regular(path, "IDX file");
    file_size_ = regular.size();
    errno = 0;
    file_ = gzdopen(regular.fd(), "rb");
    if (file_ == nullptr) {
      const std::string reason =
          errno != 0 ? std::generic_category().message(errno) : "out of memory";
      throw Error("cannot open IDX file '" + path + "': " + reason);
    }
    regular.release();  // gzclose closes it
    gzbuffer(file_, 1 << 17);
    plain_ = gzdirect(file_) == 1;
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // The most bytes the file can give: its size, or for gzip its size times deflate's largest
  // compression ratio (1032:1, runs of one byte), so that a header is checked before allocating.
  uint64_t most_bytes() const { return plain_ ? file_size_ : file_size_ * kMaxGzipRatio; }
  bool plain() const { return plain_; }
  uint64_t file_size() const { return file_size_; }

  // Reads up to `bytes` bytes; returns how many were read, fewer only at the end of the data.
  // A gzip stream cut short (zlib's Z_BUF_ERROR) also ends the data, so that the caller reports
  // it as a truncated file with the byte counts; other errors throw here.
  uint64_t read(uint8_t* out, uint64_t bytes) {
    uint64_t done = 0;
    while (done < bytes) {
      const unsigned chunk = unsigned(std::min<uint64_t>(bytes - done, uint64_t(1) << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) fail();
      if (got == 0) break;
      done += uint64_t(got);
      position_ += uint64_t(got);
    }
    int errnum = Z_OK;
    gzerror(file_, &errnum);
    if (errnum != Z_OK && errnum != Z_BUF_ERROR) fail();
    return done;
  }

 private:
  [[noreturn]] void fail() {
    int errnum = Z_OK;
    const char* message = gzerror(file_, &errnum);
    const std::string reason = errnum == Z_ERRNO
                                   ? std::string(std::generic_category().message(errno))
                                   : std::string(message) + " (is the download complete?)";
    throw Error("cannot read IDX file '" + path_ + "' after " + std::to_string(position_) +
                " bytes: " + reason);
  }

  std::string path_;
  gzFile file_ = nullptr;
  uint64_t position_ = 0;
  uint64_t file_size_ = 0;
  bool plain_ = false;
};

uint32_t big_endian_u32(const uint8_t* bytes) {
  return uint32_t(bytes[0]) << 24 | uint32_t(bytes[1]) << 16 | uint32_t(bytes[2]) << 8 |
         uint32_t(bytes[3]);
}

IdxArray read_idx_with_ndims(const std::string& path, const std::vector<int>& allowed_ndims,
                             const std::string& role) {
  GzReader reader(path);

  uint8_t magic_bytes[4];
  const uint64_t magic_read = reader.read(magic_bytes, 4);
  if (magic_read < 4) {
    throw Error("IDX file '" + path + "' is truncated: the header needs at least 4 bytes, " +
                std::to_string(magic_read) + " present");
  }
  const uint32_t magic = big_endian_u32(magic_bytes);
  const int type = magic_bytes[2];
  const int ndims = magic_bytes[3];
  const bool dims_allowed =
      allowed_ndims.empty() ||
      std::find(allowed_ndims.begin(), allowed_ndims.end(), ndims) != allowed_ndims.end();
  if (magic_bytes[0] != 0 || magic_bytes[1] != 0 || idx_type_name(type) == nullptr || ndims == 0) {
    throw Error("'" + path + "' is not an IDX file: magic number " + hex32(magic) + ", expected " +
                expected_magics(allowed_ndims, role));
  }
  if (type != kTypeUint8) {
    throw Error("IDX file '" + path + "' holds " + idx_type_name(type) + " elements (magic " +
                hex32(magic) + "); crema reads uint8 only, expected " +
                expected_magics(allowed_ndims, role));
  }
  if (!dims_allowed) {
    throw Error("IDX file '" + path + "' has " + std::to_string(ndims) + " dims (magic " +
                hex32(magic) + "), expected " + expected_magics(allowed_ndims, role));
  }

  std::vector<uint8_t> dim_bytes(size_t(4 * ndims));
  const uint64_t dims_read = reader.read(dim_bytes.data(), dim_bytes.size());
  if (dims_read < dim_bytes.size()) {
    throw Error("IDX file '" + path + "' is truncated: the header needs " +
                std::to_string(4 + dim_bytes.size()) + " bytes, " + std::to_string(4 + dims_read) +
                " present");
  }
  IdxArray array;
  uint64_t elements = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t extent = big_endian_u32(dim_bytes.data() + size_t(4) * size_t(d));
    array.dims.push_back(int64_t(extent));
    if (extent != 0 && elements > kMaxElements / extent) {
      throw Error("IDX file '" + path + "' has the implausible header " + shape_str(array.dims) +
                  "... (more than 2^40 elements); is it an IDX file?");
    }
    elements *= extent;
  }

  // A header that promises more than the file can hold is refused before anything is allocated.
  // A gzip file may still inflate to less than the bound, so the buffer grows as data arrives.
  const uint64_t header_bytes = 4 + dim_bytes.size();
  if (header_bytes + elements > reader.most_bytes()) {
    if (reader.plain()) {
      throw Error("IDX file '" + path + "' is truncated: its header " + shape_str(array.dims) +
                  " needs " + std::to_string(header_bytes + elements) + " bytes, " +
                  std::to_string(reader.file_size()) + " present");
    }
    throw Error("IDX file '" + path + "' is truncated or its header is wrong: its header " +
                shape_str(array.dims) + " needs " + std::to_string(header_bytes + elements) +
                " bytes, more than its " + std::to_string(reader.file_size()) +
                " gzip bytes can inflate to (at most " + std::to_string(kMaxGzipRatio) + " x)");
  }
  constexpr uint64_t kChunk = uint64_t(1) << 24;
  array.values.reserve(size_t(std::min(elements, kChunk)));
  uint64_t filled = 0;
  while (filled < elements) {
    const uint64_t want = std::min(elements - filled, kChunk);
    array.values.resize(size_t(filled + want));
    const uint64_t got = reader.read(array.values.data() + filled, want);
    filled += got;
    if (got < want) break;
  }
  if (filled < elements) {
    throw Error("IDX file '" + path + "' is truncated: its header " + shape_str(array.dims) +
                " needs " + std::to_string(header_bytes + elements) + " bytes, " +
                std::to_string(header_bytes + filled) + " present");
  }
  uint8_t extra[4096];
  const uint64_t trailing = reader.read(extra, sizeof(extra));
  if (trailing > 0) {
    throw Error("IDX file '" + path + "' has " + (trailing == sizeof(extra) ? "at least " : "") +
                std::to_string(trailing) + " bytes after the " +
                std::to_string(header_bytes + elements) + " its header " + shape_str(array.dims) +
                " accounts for; is the header right?");
  }
  return array;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  return read_idx_with_ndims(path, {}, "");
}

std::unique_ptr<Dataset> load_idx_dataset(const std::string& images_path,
                                          const std::string& labels_path) {
  IdxArray images = read_idx_with_ndims(images_path, {3, 4}, "images");
  IdxArray labels = read_idx_with_ndims(labels_path, {1}, "labels");
  const int64_t count = images.dims[0];
  if (labels.dims[0] != count) {
    throw Error("IDX images '" + images_path + "' hold " + std::to_string(count) +
                " samples but labels '" + labels_path + "' hold " + std::to_string(labels.dims[0]) +
                "; the two files must come from the same set");
  }
  Shape sample_shape(images.dims.begin() + 1, images.dims.end());
  if (sample_shape.size() == 2)
    sample_shape.insert(sample_shape.begin(), 1);  // [H, W] -> [1, H, W]
  std::vector<int32_t> label_values(labels.values.begin(), labels.values.end());
  std::string name = images_path;
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  return std::make_unique<InMemoryDataset>(std::move(name), std::move(sample_shape),
                                           std::move(images.values), std::move(label_values));
}

}  // namespace crema::data
