#include "core/serialization.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/float16.h"

namespace crema {
namespace {

// The format caps the header at 100 MB; a larger length means a corrupt or foreign file.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

std::string errno_text() {
  return std::strerror(errno);
}

// Writes `pieces` (pointer, bytes) to <path>.tmp, fsyncs it and renames it over `path`.
void write_pieces_atomic(const std::string& path,
                         const std::vector<std::pair<const void*, size_t>>& pieces) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write '" + temp + "': " + errno_text());
  auto fail = [&](const std::string& what) {
    const std::string reason = errno_text();
    ::close(fd);
    ::unlink(temp.c_str());
    throw Error(what + " '" + temp + "' failed: " + reason);
  };
  for (const auto& [data, bytes] : pieces) {
    const char* p = static_cast<const char*>(data);
    size_t left = bytes;
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("writing");
      p += n;
      left -= size_t(n);
    }
  }
  if (::fsync(fd) != 0) fail("flushing");
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    throw Error("closing '" + temp + "' failed: " + errno_text());
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(temp.c_str());
    throw Error("cannot move '" + temp + "' to '" + path + "': " + reason);
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  sync_directory(dir.empty() ? "." : dir);
}

const char* file_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
  }
  return "?";
}

// The dtype a tensor of the file's `dtype` keeps, when it is read as it is (not I64).
DType kept_dtype(const std::string& dtype) {
  if (dtype == "F32") return DType::f32;
  if (dtype == "F64") return DType::f64;
  return dtype == "BF16" ? DType::bf16 : DType::f16;
}

// Bytes per element of the dtypes the reader accepts (0 for any other).
size_t readable_dtype_size(const std::string& dtype) {
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F32") return 4;
  if (dtype == "F64" || dtype == "I64") return 8;
  return 0;
}

uint64_t read_le64(const unsigned char* bytes) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(bytes[i]) << (8 * i);
  return v;
}

// One header entry, checked against the format before any data is read.
struct Entry {
  std::string name, dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

Entry read_entry(const std::string& path, const std::string& name,
                 const nlohmann::ordered_json& info) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!info.is_object()) throw Error(where + ": its header entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(key)) throw Error(where + ": its header entry lacks '" + key + "'");
  }
  Entry e;
  e.name = name;
  if (!info["dtype"].is_string()) throw Error(where + ": 'dtype' is not a string");
  e.dtype = info["dtype"].get<std::string>();
  if (readable_dtype_size(e.dtype) == 0) {
    throw Error(where + " has dtype " + e.dtype + "; crema reads F32, F64, F16, BF16 and I64");
  }
  if (!info["shape"].is_array()) throw Error(where + ": 'shape' is not a list of sizes");
  uint64_t numel = 1;
  for (const auto& d : info["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40)) {
      throw Error(where + ": 'shape' holds " + d.dump() + ", not a size");
    }
    e.shape.push_back(int64_t(d.get<uint64_t>()));
    numel *= d.get<uint64_t>();
    if (numel > (uint64_t(1) << 40)) throw Error(where + ": its shape is implausibly large");
  }
  const auto& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    throw Error(where + ": 'data_offsets' is not a pair [begin, end] of byte offsets");
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  const uint64_t need = numel * readable_dtype_size(e.dtype);
  if (e.end < e.begin || e.end - e.begin != need) {
    throw Error(where + " (" + e.dtype + " " + shape_str(e.shape) + ") needs " +
                std::to_string(need) + " bytes but its data_offsets [" + std::to_string(e.begin) +
                ", " + std::to_string(e.end) + "] span " +
                std::to_string(e.end >= e.begin ? e.end - e.begin : 0));
  }
  return e;
}

// Reads the shape's elements of type T and converts each to float.
template <class T, class Convert>
Tensor widen(std::ifstream& in, const Shape& shape, Convert convert) {
  std::vector<T> values(size_t(shape_numel(shape)));
  in.read(reinterpret_cast<char*>(values.data()), std::streamsize(values.size() * sizeof(T)));
  Tensor t(shape, DType::f32);
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = convert(values[i]);
  return t;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& contents) {
  write_pieces_atomic(path, {{contents.data(), contents.size()}});
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open directory '" + dir + "': " + errno_text());
  const int rc = ::fsync(fd);
  const std::string reason = errno_text();
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); their renames are as durable as they get.
  if (rc != 0 && errno != EINVAL) throw Error("flushing directory '" + dir + "' failed: " + reason);
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::vector<std::pair<const void*, size_t>> pieces;
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    CREMA_CHECK(tensor.device().is_cpu(),
                "save_safetensors: copy '" + name + "' to the host first");
    CREMA_CHECK(header.count(name) == 0, "save_safetensors: tensor '" + name + "' given twice");
    header[name] = {{"dtype", file_dtype(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + tensor.nbytes()}}};
    offset += tensor.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format pads the header to 8 bytes
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) {
    length[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));
  }
  pieces.emplace_back(length, 8);
  pieces.emplace_back(text.data(), text.size());
  for (const auto& entry : tensors) pieces.emplace_back(entry.second.raw(), entry.second.nbytes());
  write_pieces_atomic(path, pieces);
}

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path,
                                                             Widened* widened, HalfTensors half) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  unsigned char len_bytes[8] = {};
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    throw Error(path + ": not a safetensors file (" + std::to_string(file_size) +
                " bytes, shorter than the 8-byte header length)");
  }
  const uint64_t header_len = read_le64(len_bytes);
  if (header_len > file_size - 8 || header_len > kMaxHeaderBytes) {
    throw Error(path + ": not a safetensors file, or truncated: the header length " +
                std::to_string(header_len) + " exceeds the file's " + std::to_string(file_size) +
                " bytes");
  }
  std::string text(header_len, '\0');
  in.read(text.data(), std::streamsize(header_len));
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": corrupt safetensors header (not JSON: " + e.what() + ")");
  }
  if (!header.is_object()) throw Error(path + ": corrupt safetensors header (not a JSON object)");

  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name != "__metadata__") entries.push_back(read_entry(path, name, info));
  }
  const uint64_t data_start = 8 + header_len;
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const Entry& e = *by_offset[i];
    if (i > 0 && e.begin < by_offset[i - 1]->end && e.end > e.begin) {
      throw Error(path + ": tensors '" + by_offset[i - 1]->name + "' and '" + e.name +
                  "' overlap in the file (corrupt header)");
    }
    if (data_start + e.end > file_size) {
      throw Error(path + " is truncated: tensor '" + e.name + "' ends at byte " +
                  std::to_string(data_start + e.end) + " but the file has " +
                  std::to_string(file_size));
    }
  }

  std::vector<std::pair<std::string, Tensor>> out;
  for (const Entry& e : entries) {
    in.seekg(std::streamoff(data_start + e.begin));
    const bool is_half = e.dtype == "F16" || e.dtype == "BF16";
    if (e.dtype == "F32" || e.dtype == "F64" || (is_half && half == HalfTensors::keep)) {
      Tensor t(e.shape, kept_dtype(e.dtype));
      in.read(static_cast<char*>(t.raw()), std::streamsize(t.nbytes()));
      out.emplace_back(e.name, std::move(t));
    } else if (e.dtype == "I64") {
      out.emplace_back(e.name, widen<int64_t>(in, e.shape, [](int64_t v) { return float(v); }));
    } else if (e.dtype == "F16") {
      out.emplace_back(e.name, widen<uint16_t>(in, e.shape, f16_to_f32));
      if (widened) ++widened->f16;
    } else {
      out.emplace_back(e.name, widen<uint16_t>(in, e.shape, bf16_to_f32));
      if (widened) ++widened->bf16;
    }
    if (!in) throw Error(path + ": read error in tensor '" + e.name + "'");
  }
  return out;
}

}  // namespace crema
