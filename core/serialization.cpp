#include "core/serialization.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace crema {
namespace {

void write_le64(std::ostream& out, uint64_t v) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));
  out.write(reinterpret_cast<const char*>(bytes), 8);
}

}  // namespace

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    CREMA_CHECK(tensor.device().is_cpu(), "save_safetensors: copy '" + name + "' to the host first");
    header[name] = {{"dtype", tensor.dtype() == DType::f32 ? "F32" : "F64"},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + tensor.nbytes()}}};
    offset += tensor.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format pads the header to 8 bytes
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + temp + "'");
    write_le64(out, text.size());
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto& entry : tensors) {
      out.write(static_cast<const char*>(entry.second.raw()), std::streamsize(entry.second.nbytes()));
    }
    out.flush();
    if (!out) throw Error("writing '" + temp + "' failed (disk full?)");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    throw Error("cannot move '" + temp + "' to '" + path + "': " + std::strerror(errno));
  }
}

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open weights file '" + path + "'");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  unsigned char len_bytes[8] = {};
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    throw Error(path + ": not a safetensors file (shorter than its 8-byte header length)");
  }
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(len_bytes[i]) << (8 * i);
  if (header_len > file_size - 8) {
    throw Error(path + ": not a safetensors file (header length " + std::to_string(header_len) +
                " exceeds the file size " + std::to_string(file_size) + ")");
  }
  std::string text(header_len, '\0');
  in.read(text.data(), std::streamsize(header_len));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": bad safetensors header: " + e.what());
  }
  const uint64_t data_start = 8 + header_len;
  std::vector<std::pair<std::string, Tensor>> out;
  try {
    for (const auto& [name, info] : header.items()) {
      if (name == "__metadata__") continue;
      const std::string dtype = info.at("dtype").get<std::string>();
      if (dtype != "F32" && dtype != "F64") {
        throw Error(path + ": tensor '" + name + "' has dtype " + dtype + " (crema reads F32 and F64)");
      }
      Tensor t(info.at("shape").get<Shape>(), dtype == "F32" ? DType::f32 : DType::f64);
      const uint64_t begin = info.at("data_offsets")[0].get<uint64_t>();
      const uint64_t end = info.at("data_offsets")[1].get<uint64_t>();
      if (end < begin || end - begin != t.nbytes() || data_start + end > file_size) {
        throw Error(path + ": tensor '" + name + "' has inconsistent offsets or the file is truncated");
      }
      in.seekg(std::streamoff(data_start + begin));
      in.read(static_cast<char*>(t.raw()), std::streamsize(t.nbytes()));
      if (!in) throw Error(path + ": truncated while reading tensor '" + name + "'");
      out.emplace_back(name, std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": bad safetensors header: " + e.what());
  }
  return out;
}

}  // namespace crema
