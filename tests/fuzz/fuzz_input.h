// What every fuzz target shares (each includes this header once): the fuzzer's bytes written to a
// file, since crema's readers take paths, exactly as a user's file reaches them; and UBSan's
// settings, so that a target run by hand behaves as under scripts/fuzz.sh.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace crema::fuzz {

// A directory of this process's own (parallel fuzzer jobs must not share files), removed at exit.
class InputDir {
 public:
  InputDir()
      : path_(std::filesystem::temp_directory_path() /
              ("crema_fuzz_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~InputDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline const std::filesystem::path& input_dir() {
  static const InputDir dir;
  return dir.path();
}

// Writes `size` bytes to <input_dir>/<name> and returns its path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = (input_dir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

}  // namespace crema::fuzz

// Read by UBSan at start-up (UBSAN_OPTIONS still overrides): every report halts the target, which
// libFuzzer records as a crash, except the third-party ones listed in ubsan.supp.
extern "C" const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1:suppressions=" CREMA_FUZZ_UBSAN_SUPPRESSIONS;
}
