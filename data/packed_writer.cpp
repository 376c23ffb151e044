#include "data/packed_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <thread>

#include "core/error.h"
#include "core/regular_file.h"
#include "core/serialization.h"
#include "data/image_ops.h"
#include "data/jpeg.h"
#include "data/packed_index.h"

namespace fs = std::filesystem;

namespace crema::data {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// The whole file, its size taken from the open descriptor (a sample's length is a u32).
std::vector<uint8_t> read_image_bytes(const std::string& path) {
  RegularFile file(path, "image");
  if (file.size() > std::numeric_limits<uint32_t>::max()) {
    throw Error("image '" + path + "' is " + std::to_string(file.size()) +
                " bytes; a packed sample holds at most 4 GiB");
  }
  std::vector<uint8_t> bytes(size_t(file.size()));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(file.fd(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read image '" + path + "' (" + errno_text() + ")");
    if (n == 0) throw Error("image '" + path + "' shrank while it was read");
    done += size_t(n);
  }
  return bytes;
}

// `image` resized so that its longer side is `max_side`, as JPEG bytes (gray when the three
// channels are equal); `height` and `width` receive the new size.
std::vector<uint8_t> reencode(const Image& image, int64_t max_side, int quality,
                              const std::string& name, uint32_t& height, uint32_t& width) {
  const int64_t h = image.height(), w = image.width(), longer = std::max(h, w);
  const auto scaled = [&](int64_t side) {
    return std::max<int64_t>(1, std::llround(double(side) * double(max_side) / double(longer)));
  };
  Image resized;
  resize(image, scaled(h), scaled(w), resized);
  const int64_t plane = resized.height() * resized.width();
  const float* pixels = resized.pixels.data();  // [3, H, W]
  const bool gray = std::equal(pixels, pixels + plane, pixels + plane) &&
                    std::equal(pixels, pixels + plane, pixels + 2 * plane);
  const int channels = gray ? 1 : 3;
  std::vector<uint8_t> interleaved(size_t(plane * channels));  // [H, W, channels]
  for (int c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < plane; ++i) {
      interleaved[size_t(i * channels + c)] =
          uint8_t(std::clamp(std::nearbyint(pixels[c * plane + i]), 0.0f, 255.0f));
    }
  }
  height = uint32_t(resized.height());
  width = uint32_t(resized.width());
  return encode_jpeg(interleaved.data(), int(height), int(width), channels, quality, name);
}

// One shard file being written: appended to, fsync'ed when closed.
class ShardWriter {
 public:
  explicit ShardWriter(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot create the shard '" + path_ + "' (" + errno_text() + ")");
  }
  ~ShardWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  uint64_t size() const { return size_; }
  void append(const std::vector<uint8_t>& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error("cannot write the shard '" + path_ + "' (" + errno_text() + ")");
      done += size_t(n);
    }
    size_ += bytes.size();
  }
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
      throw Error("cannot write the shard '" + path_ + "' (" + errno_text() + ")");
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The sample's path as stored: relative to `root` when it lies under it.
std::string stored_path(const std::string& path, const std::string& root) {
  if (root.empty()) return path;
  const fs::path relative = fs::path(path).lexically_relative(root);
  if (relative.empty() || *relative.begin() == "..") return path;
  return relative.generic_string();
}

// One file made ready for its shard: its bytes (as read, or re-encoded) and image size, or the
// reason it cannot be packed.
struct Prepared {
  std::vector<uint8_t> bytes;
  uint32_t height = 0, width = 0;
  bool reencoded = false;
  std::string error;               // a crema::Error's message, naming the file
  std::exception_ptr other_error;  // anything else (out of memory), re-thrown as it is
};

Prepared prepare(const ImageFile& file, const PackOptions& options) {
  Prepared out;
  try {
    out.bytes = read_image_bytes(file.path);
    DecodeOptions decode;
    decode.max_pixels = options.max_pixels;
    Image image;
    decode_image(out.bytes.data(), out.bytes.size(), 3, file.path, image, decode);
    out.height = uint32_t(image.height());
    out.width = uint32_t(image.width());
    if (options.max_side > 0 && std::max(image.height(), image.width()) > options.max_side) {
      out.bytes =
          reencode(image, options.max_side, options.quality, file.path, out.height, out.width);
      out.reencoded = true;
    }
  } catch (const Error& e) {
    out.error = file.origin.empty() ? e.what() : file.origin + ": " + e.what();
  } catch (...) {
    out.other_error = std::current_exception();
  }
  return out;
}

// Packs every sample into the shards of `dir` and returns the index. Files are read, decoded
// and re-encoded by `options.workers` threads a chunk at a time; the chunk is then written in
// sample order, so the output does not depend on the number of workers.
PackedIndex write_shards(const ImageFileDataset& source, const fs::path& dir,
                         const PackOptions& options, PackSummary& summary) {
  PackedIndex index;
  index.class_names = class_list(source);
  index.named = !source.class_names().empty();
  std::unique_ptr<ShardWriter> shard;
  const auto close_shard = [&] {
    index.shard_sizes.push_back(shard->size());
    shard->close();
    shard.reset();
  };
  const int workers = std::max(1, options.workers);
  const int64_t chunk = 16 * int64_t(workers);
  std::vector<Prepared> ready;
  for (int64_t begin = 0; begin < source.size(); begin += chunk) {
    const int64_t count = std::min(chunk, source.size() - begin);
    ready.assign(size_t(count), Prepared{});
    std::atomic<int64_t> next{0};
    const auto work = [&] {
      for (int64_t i; (i = next++) < count;) {
        ready[size_t(i)] = prepare(source.file(begin + i), options);
      }
    };
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w) threads.emplace_back(work);
    work();
    for (std::thread& thread : threads) thread.join();

    for (int64_t i = 0; i < count; ++i) {
      Prepared& file = ready[size_t(i)];
      if (file.other_error) std::rethrow_exception(file.other_error);
      if (!file.error.empty()) {
        if (!options.skip_bad) throw Error(file.error);
        summary.skipped.push_back(file.error);
        continue;
      }
      if (shard && shard->size() > 0 && shard->size() + file.bytes.size() > options.shard_bytes) {
        close_shard();
      }
      if (!shard) {
        shard = std::make_unique<ShardWriter>(
            (dir / shard_file_name(index.shard_sizes.size())).string());
      }
      PackedSample sample;
      sample.shard = uint32_t(index.shard_sizes.size());
      sample.label = source.file(begin + i).label;
      sample.offset = shard->size();
      sample.length = uint32_t(file.bytes.size());
      sample.crc32 = crc32_of(file.bytes.data(), file.bytes.size());
      sample.height = file.height;
      sample.width = file.width;
      sample.path = stored_path(source.file(begin + i).path, options.root);
      shard->append(file.bytes);
      summary.bytes += file.bytes.size();
      summary.reencoded += file.reencoded ? 1 : 0;
      index.samples.push_back(std::move(sample));
    }
  }
  if (shard) close_shard();
  if (index.samples.empty()) {
    throw Error(source.description() + ": no file could be packed (" +
                std::to_string(summary.skipped.size()) + " skipped; the first: " +
                (summary.skipped.empty() ? "" : summary.skipped.front()) + ")");
  }
  return index;
}

// Whether `dir` may be replaced: missing, empty, or an earlier packed dataset.
void check_replaceable(const fs::path& dir) {
  std::error_code error;
  if (!fs::exists(dir, error)) return;
  if (fs::is_directory(dir, error) &&
      (fs::is_empty(dir, error) || fs::exists(dir / kPackIndexName, error))) {
    return;
  }
  throw Error("'" + dir.string() +
              "' exists and is not a packed dataset; give another OUT folder or remove it");
}

}  // namespace

PackSummary write_packed(const ImageFileDataset& source, const std::string& out_dir,
                         const PackOptions& options) {
  if (options.shard_bytes == 0) throw Error("the shard size must be positive");
  if (options.max_side < 0) throw Error("--max-side must be 0 (keep every file) or more");
  if (options.quality < 1 || options.quality > 100) throw Error("--quality must lie in 1..100");
  const fs::path out = fs::path(out_dir).lexically_normal();
  const fs::path name = out.filename().empty() ? out.parent_path().filename() : out.filename();
  const fs::path target = out.filename().empty() ? out.parent_path() : out;
  check_replaceable(target);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string suffix = std::to_string(::getpid());
  const fs::path temp = parent / ("." + name.string() + ".tmp-" + suffix);
  const fs::path old = parent / ("." + name.string() + ".old-" + suffix);

  PackSummary summary;
  std::error_code error;
  fs::create_directories(parent, error);
  fs::remove_all(temp, error);
  if (!fs::create_directory(temp, error)) {
    throw Error("cannot create the folder '" + temp.string() + "' (" + error.message() + ")");
  }
  try {
    const PackedIndex index = write_shards(source, temp, options, summary);
    write_file_atomic((temp / kPackIndexName).string(), encode_pack_index(index));
    summary.samples = int64_t(index.samples.size());
    summary.shards = index.shard_sizes.size();
    const bool replacing = fs::exists(target, error);
    if (replacing) fs::rename(target, old);
    try {
      fs::rename(temp, target);
    } catch (const fs::filesystem_error&) {
      if (replacing) fs::rename(old, target, error);  // the earlier dataset back in its place
      throw;
    }
    sync_directory(parent.string());
    if (replacing) fs::remove_all(old, error);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(temp, error);
    throw Error("cannot write the packed dataset '" + target.string() + "': " + e.what());
  } catch (...) {
    fs::remove_all(temp, error);
    throw;
  }
  return summary;
}

}  // namespace crema::data
