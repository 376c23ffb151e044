#include "tests/support/synthetic_data.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"

namespace crema::testing {
namespace {

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

void put_u32(std::vector<unsigned char>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back((unsigned char)(v >> shift));
}

}  // namespace

void write_synthetic_idx(const std::string& dir, int count, unsigned seed) {
  Random random(seed);
  std::vector<unsigned char> images, labels;
  put_u32(images, 0x00000803);
  put_u32(images, uint32_t(count));
  put_u32(images, 8);
  put_u32(images, 8);
  put_u32(labels, 0x00000801);
  put_u32(labels, uint32_t(count));
  for (int n = 0; n < count; ++n) {
    const int c = int(random.below(10));
    labels.push_back((unsigned char)c);
    const int row = (c / 4) * 3, col = (c % 4) * 2;
    for (int y = 0; y < 8; ++y) {
      for (int x = 0; x < 8; ++x) {
        const bool lit = y >= row && y < row + 2 && x >= col && x < col + 2;
        images.push_back((unsigned char)(random.below(100) + (lit ? 150 : 0)));
      }
    }
  }
  write_gz(dir + "/images.gz", images);
  write_gz(dir + "/labels.gz", labels);
}

std::string synthetic_config(const std::string& dir) {
  return R"(name: synthetic
seed: 3
data:
  train:
    source: {format: idx, images: )" + dir + R"(/images.gz, labels: )" + dir + R"(/labels.gz}
    batch_size: 16
    transform: [{scale: 0.00390625}]
  test:
    source: {format: idx, images: )" + dir + R"(/images.gz, labels: )" + dir + R"(/labels.gz}
    batch_size: 30
    transform: [{scale: 0.00390625}]
model:
  inputs: {data: [1, 8, 8], label: []}
  layers:
    - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 8, kernel_size: 3, pad: 1}
    - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
    - {name: pool1, type: Pooling, bottom: conv1, top: pool1, kernel_size: 2, stride: 2}
    - {name: ip1, type: InnerProduct, bottom: pool1, top: ip1, num_output: 10}
    - {name: loss, type: SoftmaxWithLoss, bottom: [ip1, label], top: loss}
    - {name: accuracy, type: Accuracy, bottom: [ip1, label], top: accuracy, phase: test}
solver:
  type: sgd
  base_lr: 0.05
  momentum: 0.9
  weight_decay: 0.0005
  lr_policy: {type: inv, gamma: 0.0001, power: 0.75}
  max_iter: 300
  test_interval: 100
  display: 50
)";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/crema_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace crema::testing
