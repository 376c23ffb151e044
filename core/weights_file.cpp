#include "core/weights_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/float16.h"
#include "core/pth.h"
#include "core/regular_file.h"
#include "core/serialization.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

// What --weights can be given instead of a directory.
std::string directory_advice(const std::string& path) {
  const fs::path dir(path);
  if (fs::exists(dir / "checkpoints")) {
    return "pass " + (dir / "checkpoints/last/model.safetensors").string() +
           " (its latest weights), or use --resume " + path + " to continue that run";
  }
  if (fs::exists(dir / "model.safetensors")) {
    return "pass " + (dir / "model.safetensors").string() + ", or use --resume " + path +
           " to continue from that checkpoint";
  }
  return "pass a weights file (.safetensors, or a PyTorch .pth); a run's latest weights are "
         "RUN/checkpoints/last/model.safetensors";
}

// The first bytes, as a person reads them: printable characters, others as \xNN.
std::string shown(const std::string& bytes) {
  std::string text;
  for (unsigned char c : bytes)
    text += c >= 32 && c < 127 ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  return text;
}

}  // namespace

WeightsFile read_weights_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw Error(path + " is a directory, not a weights file: " + directory_advice(path));
  }
  const RegularFile file(path, "weights file");  // no FIFO or device: nothing waits
  std::string head(16, '\0');
  const ssize_t n = ::pread(file.fd(), head.data(), head.size(), 0);
  if (n < 0) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  head.resize(size_t(n));
  // safetensors: a little-endian header length (at most 100 MB: its top bytes are 0), then '{'.
  if (head.size() > 8 && head[8] == '{' && head.compare(4, 4, "\0\0\0\0", 4) == 0) {
    WeightsFile out;
    Widened widened;
    out.tensors = load_safetensors(path, &widened);
    out.notes = widened.text();
    return out;
  }
  if (head.compare(0, 4, "PK\x03\x04") == 0 || head.compare(0, 4, "PK\x05\x06") == 0) {
    return load_pth(path);
  }
  if (head.size() >= 2 && uint8_t(head[0]) == 0x80 && uint8_t(head[1]) <= 5) {
    // torch < 1.6 wrote pickles one after another, the first one its magic number
    // 0x1950a86a20f9469cfc6c (0x80 0x02 0x8a 0x0a ...); pickle.dump writes a bare pickle.
    const bool legacy = head.compare(0, 4, "\x80\x02\x8a\x0a", 4) == 0;
    throw Error(path +
                (legacy ? " is a PyTorch checkpoint in the legacy format of torch < 1.6"
                        : " is a Python pickle, not a PyTorch checkpoint") +
                ", which crema does not read; re-save it with torch >= 1.6: "
                "torch.save(torch.load(OLD), NEW)");
  }
  throw Error(path + " is not a weights file crema reads: it starts with \"" + shown(head) +
              "\", neither safetensors (an 8-byte length, then '{') nor a PyTorch checkpoint " +
              "(a zip, \"PK\\x03\\x04\")");
}

}  // namespace crema
