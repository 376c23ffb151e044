// The PyTorch checkpoint reader (core/pth.h, core/torch_pickle.h) and the recognition of a weights
// file by its content (core/weights_file.h), on the files of tests/fixtures/pth/
// (make_pth_fixtures.py): torch.save's own files read exactly, and each bent file refused with
// one line naming what is wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/float16.h"
#include "core/pth.h"
#include "core/serialization.h"
#include "core/weights_file.h"
#include "tests/support/error_text.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

const std::string kDir = std::string(CREMA_SOURCE_DIR) + "/tests/fixtures/pth/";

// Every tensor of `file` equals, exactly, the float32 values torch itself gives
// (expected.safetensors, "<file>/<name>"), in torch's order.
void expect_read_exactly(const std::string& file, const WeightsFile& read) {
  std::map<std::string, Tensor> expected;
  for (auto& [name, t] : load_safetensors(kDir + "expected.safetensors")) {
    if (name.rfind(file + "/", 0) == 0) expected[name.substr(file.size() + 1)] = t;
  }
  const std::vector<std::string> order = {"conv.weight",
                                          "conv.bias",
                                          "bn.weight",
                                          "bn.bias",
                                          "bn.running_mean",
                                          "bn.running_var",
                                          "bn.num_batches_tracked",
                                          "fc_t.weight"};
  ASSERT_EQ(read.tensors.size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [name, t] = read.tensors[i];
    EXPECT_EQ(name, order[i]);
    const Tensor& want = expected.at(name);
    EXPECT_EQ(t.shape(), want.shape()) << name;
    EXPECT_EQ(t.dtype(), DType::f32) << name;
    EXPECT_EQ(t.to_vector(), want.to_vector()) << file << " " << name;
  }
}

TEST(Pth, ReadsTorchSaveExactlyWithItsStridesAndScalars) {
  const WeightsFile read = load_pth(kDir + "tiny_f32.pth");
  expect_read_exactly("tiny_f32", read);
  // fc_t.weight is a transposed view (strides (1, 3)) of a 4x3 storage: gathered, not copied.
  EXPECT_EQ(read.tensors[7].second.shape(), Shape({3, 4}));
  EXPECT_EQ(read.tensors[6].second.shape(), Shape({}));  // an int64 scalar, as f32
  EXPECT_EQ(read.tensors[6].second.to_vector(), std::vector<float>({7.0f}));
  EXPECT_EQ(read.notes, "");
}

TEST(Pth, WidensHalfAndBfloat16ToF32AndSaysSo) {
  const WeightsFile f16 = load_pth(kDir + "tiny_f16.pth");
  expect_read_exactly("tiny_f16", f16);
  EXPECT_EQ(f16.notes, "converted 7 f16 tensors to f32");
  const WeightsFile bf16 = load_pth(kDir + "tiny_bf16.pth");
  expect_read_exactly("tiny_bf16", bf16);
  EXPECT_EQ(bf16.notes, "converted 7 bf16 tensors to f32");
}

TEST(Pth, FindsANestedStateDictAndRemovesDataParallelPrefixes) {
  // {'epoch': 3, 'model': {'module.conv.weight': ...}, 'optimizer': {... lists, floats ...}}
  const WeightsFile read = load_pth(kDir + "nested.pth");
  expect_read_exactly("tiny_f32", read);
  EXPECT_EQ(read.notes, "the state_dict under 'model'; 'module.' prefixes removed");
}

// Each bent file of make_pth_fixtures.py: one line naming the problem.
TEST(Pth, RefusesEachMaliciousOrBrokenFileInOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"os_system",
       "the pickle names the global 'os.system', which a state_dict never holds; "
       "refused, nothing was run"},
      {"builtins_eval", "the global 'builtins.eval'"},
      {"unknown_global", "the global '__main__.Evil'"},
      {"unknown_storage", "the global 'torch.ByteStorage'"},
      {"storage_short", "tensor 'w' of size [2, 4] has more elements than its storage's 4"},
      {"offset_past_end", "tensor 'w' (offset 2, size [3], stride [1]) reaches past its storage"},
      {"negative_stride", "negative sizes and strides are refused"},
      {"duplicate_key", "the key 'w' appears twice in one dict"},
      {"no_stop", "the pickle ends without STOP (truncated)"},
      {"huge_numel",
       "its storage claims 1099511627776 f32 elements but the entry "
       "'archive/data/0' holds 16 bytes"},
      {"missing_storage", "its storage 'archive/data/7' is missing from the zip"},
      // Found by the fuzzer: a storage read for tensor 'a' named again, 25 times larger.
      {"storage_regrown",
       "tensor 'b': its storage claims 100 f32 elements but the entry "
       "'archive/data/0' holds 16 bytes"},
      {"truncated", "cannot be read"},
  };
  for (const auto& [file, needle] : cases) {
    const std::string path = kDir + file + ".pth";
    const std::string e = testing::error_of([&] { read_weights_file(path); });
    EXPECT_CONTAINS(e, needle);
    EXPECT_EQ(e.rfind(path, 0), 0u) << "names the file: " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/crema_pth_os_system_ran"));
}

TEST(WeightsFile, RecognisesWhatItIsGiven) {
  const std::string dir = testing::fresh_dir("weights_file_recognition");
  std::filesystem::create_directories(dir + "/run/checkpoints/last");
  EXPECT_CONTAINS(testing::error_of([&] { read_weights_file(dir + "/run"); }),
                  "is a directory, not a weights file: pass " + dir +
                      "/run/checkpoints/last/model.safetensors (its latest weights), or use "
                      "--resume " +
                      dir + "/run to continue that run");
  EXPECT_CONTAINS(testing::error_of([&] { read_weights_file(kDir + "legacy.pth"); }),
                  "legacy format of torch < 1.6, which crema does not read; re-save it with "
                  "torch >= 1.6");
  testing::write_text(dir + "/notes.txt", "hello, weights\n");
  EXPECT_CONTAINS(testing::error_of([&] { read_weights_file(dir + "/notes.txt"); }),
                  "is not a weights file crema reads: it starts with \"hello, weights\\x0a\"");
  // A FIFO would make a plain open wait for a writer forever.
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  EXPECT_CONTAINS(testing::error_of([&] { read_weights_file(dir + "/fifo"); }),
                  "weights file '" + dir + "/fifo' is a FIFO, not a regular file");
  // A zip that is not torch's.
  std::ofstream(dir + "/empty.zip", std::ios::binary)
      << std::string("PK\x05\x06", 4) << std::string(18, '\0');
  EXPECT_CONTAINS(testing::error_of([&] { read_weights_file(dir + "/empty.zip"); }),
                  "a zip but not a PyTorch checkpoint (no <name>/data.pkl entry");
}

// A safetensors file of F16, BF16 and I64 tensors, written byte by byte.
TEST(WeightsFile, SafetensorsHalfAndBfloat16BecomeF32) {
  const std::string dir = testing::fresh_dir("weights_file_half");
  const std::string header = R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
                             R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]},)"
                             R"("n":{"dtype":"I64","shape":[],"data_offsets":[10,18]}})";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  file += header;
  const uint16_t halves[] = {0x3c00, 0xc000, 0x0001, 0x3f80, 0xc0a0};  // 1, -2, 2^-24; 1, -5
  file.append(reinterpret_cast<const char*>(halves), sizeof(halves));
  const int64_t tracked = 12;
  file.append(reinterpret_cast<const char*>(&tracked), 8);
  std::ofstream(dir + "/w.safetensors", std::ios::binary) << file;
  const WeightsFile read = read_weights_file(dir + "/w.safetensors");
  ASSERT_EQ(read.tensors.size(), 3u);
  EXPECT_EQ(read.tensors[0].second.to_vector(), std::vector<float>({1.0f, -2.0f, 0x1p-24f}));
  EXPECT_EQ(read.tensors[1].second.to_vector(), std::vector<float>({1.0f, -5.0f}));
  EXPECT_EQ(read.tensors[2].second.shape(), Shape({}));
  EXPECT_EQ(read.tensors[2].second.to_vector(), std::vector<float>({12.0f}));
  EXPECT_EQ(read.notes, "converted 1 f16 and 1 bf16 tensors to f32");
}

// f16 -> f32 against the format's definition, on every kind of value.
TEST(Float16, WidensEveryKindOfValueExactly) {
  EXPECT_EQ(f16_to_f32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0x1.554p-2f);  // 1/3 rounded to f16
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);     // the largest
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);     // the smallest normal
  EXPECT_EQ(f16_to_f32(0x03ff), 0x3ffp-24f);   // the largest subnormal
  EXPECT_EQ(f16_to_f32(0x8001), -0x1p-24f);    // the smallest subnormal, negative
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 0x1.92p+1f);  // pi rounded to bf16
  EXPECT_EQ(bf16_to_f32(0xff80), -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace crema
