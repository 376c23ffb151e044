// Helpers shared by the data tests: a temporary folder per test, images whose every pixel
// differs, files written byte for byte (error-message checks: tests/support/error_text.h).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/image.h"
#include "tests/support/error_text.h"

namespace crema::data::testing {

namespace fs = std::filesystem;
using crema::testing::error_of;

// A folder of its own for each test, removed at the end.
class DataFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / ("crema_data_" + std::string(info->test_suite_name()) +
                                             "_" + info->name() + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& relative) const { return (dir_ / relative).string(); }

  // Writes `bytes` (or text) to dir/relative, creating folders on the way.
  std::string write_file(const std::string& relative, const std::string& bytes) const {
    const fs::path file = dir_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return file.string();
  }

  fs::path dir_;
};

// A C x H x W image of distinct 8-bit values that depend on (c, h, w) and `salt`, so a
// misplaced, mirrored or transposed pixel shows.
inline Image pattern_image(int64_t channels, int64_t height, int64_t width, int salt = 0) {
  Image image;
  image.reset({channels, height, width});
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    image.pixels[i] = float((i * 37 + size_t(salt) * 53 + 5) % 251);
  }
  return image;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace crema::data::testing
