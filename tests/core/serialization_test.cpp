// The safetensors reader and writer: the exact bytes of the format, round trips, and every kind of
// bad file ending in one crema::Error that names the file and what is wrong.
#include "core/serialization.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/random.h"

namespace crema {
namespace {

std::string temp_path(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/crema_serialization_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  if (name == "fresh") std::filesystem::remove_all(dir);  // the first call of a test
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A file made by hand from a header text and data bytes, as the format defines it.
std::string make_file(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return bytes + header + data;
}

std::string float_bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

std::string error_of(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Safetensors, RoundTripKeepsNamesOrderShapesAndBits) {
  Tensor a = Tensor::from_vector({2, 3}, {1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f});
  Tensor b({3}, DType::f64);
  b.data<double>()[0] = 1.0 / 3.0, b.data<double>()[1] = -1e-300, b.data<double>()[2] = 42.0;
  Tensor scalar = Tensor::from_vector({}, {0.125f});
  Tensor empty = Tensor::from_vector({0, 4}, {});
  const std::string path = temp_path("round.safetensors");
  save_safetensors(
      path, {{"z.weight", a}, {"a.bias", b}, {"bn.num_batches_tracked", scalar}, {"e", empty}});
  const auto loaded = load_safetensors(path);
  ASSERT_EQ(loaded.size(), 4u);
  EXPECT_EQ(loaded[0].first, "z.weight");  // file order, not sorted
  EXPECT_EQ(loaded[1].first, "a.bias");
  EXPECT_EQ(loaded[0].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::memcmp(loaded[0].second.raw(), a.raw(), a.nbytes()), 0);
  EXPECT_EQ(loaded[1].second.dtype(), DType::f64);
  EXPECT_EQ(std::memcmp(loaded[1].second.raw(), b.raw(), b.nbytes()), 0);
  EXPECT_EQ(loaded[2].second.shape(), Shape{});
  EXPECT_EQ(loaded[2].second.to_vector(), std::vector<float>{0.125f});
  EXPECT_EQ(loaded[3].second.shape(), (Shape{0, 4}));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

// bf16 and f16 tensors: every 16-bit pattern (NaN payloads too) written as BF16 / F16 and read
// back bit for bit when kept; widened to f32, exactly, and counted, by default.
TEST(Safetensors, Bf16AndF16RoundTripBitExact) {
  Tensor b({256, 256}, DType::bf16), h({65536}, DType::f16);
  for (uint32_t i = 0; i < 65536; ++i) {
    b.data<bf16_t>()[i] = bf16_t{uint16_t(i)};
    h.data<f16_t>()[i] = f16_t{uint16_t(65535 - i)};
  }
  const Tensor f = Tensor::from_vector({2}, {1.0f, 2.0f});
  const std::string path = temp_path("half.safetensors");
  save_safetensors(path, {{"b", b}, {"f", f}, {"h", h}});
  const std::string bytes = read_bytes(path);
  EXPECT_NE(bytes.find(R"("b":{"dtype":"BF16","shape":[256,256],"data_offsets":[0,131072]})"),
            std::string::npos);
  EXPECT_NE(bytes.find(R"("h":{"dtype":"F16","shape":[65536],"data_offsets":[131080,262152]})"),
            std::string::npos);

  Widened widened;
  const auto kept = load_safetensors(path, &widened, HalfTensors::keep);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].second.dtype(), DType::bf16);
  EXPECT_EQ(kept[0].second.shape(), b.shape());
  EXPECT_EQ(std::memcmp(kept[0].second.raw(), b.raw(), b.nbytes()), 0);
  EXPECT_EQ(kept[1].second.dtype(), DType::f32);
  EXPECT_EQ(kept[2].second.dtype(), DType::f16);
  EXPECT_EQ(std::memcmp(kept[2].second.raw(), h.raw(), h.nbytes()), 0);
  EXPECT_EQ(widened.text(), "");  // nothing was converted

  const auto wide = load_safetensors(path, &widened);
  EXPECT_EQ(wide[0].second.dtype(), DType::f32);
  EXPECT_EQ(wide[2].second.dtype(), DType::f32);
  const std::vector<float> bw = wide[0].second.to_vector(), hw = wide[2].second.to_vector();
  for (uint32_t i = 0; i < 65536; ++i) {
    const float bv = bf16_to_f32(uint16_t(i)), hv = f16_to_f32(uint16_t(65535 - i));
    ASSERT_TRUE(bw[i] == bv || (std::isnan(bw[i]) && std::isnan(bv))) << i;
    ASSERT_TRUE(hw[i] == hv || (std::isnan(hw[i]) && std::isnan(hv))) << i;
  }
  EXPECT_EQ(widened.text(), "converted 1 f16 and 1 bf16 tensors to f32");
}

TEST(Safetensors, Bf16LengthThatDisagreesWithTheShapeNamesTheTensor) {
  const std::string path = temp_path("bf16len.safetensors");
  write_bytes(path, make_file(R"({"w":{"dtype":"BF16","shape":[3,3],"data_offsets":[0,36]}})",
                              std::string(36, 'x')));
  EXPECT_NE(error_of(path).find("tensor 'w' (BF16 [3, 3]) needs 18 bytes but its data_offsets "
                                "[0, 36] span 36"),
            std::string::npos)
      << error_of(path);
  try {
    load_safetensors(path, nullptr, HalfTensors::keep);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'w' (BF16 [3, 3]) needs 18 bytes"),
              std::string::npos);
  }
}

TEST(Safetensors, WritesTheFormatByteForByte) {
  const std::string path = temp_path("exact.safetensors");
  save_safetensors(path, {{"w", Tensor::from_vector({2}, {1.0f, -2.0f})}});
  const std::string bytes = read_bytes(path);
  const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string header = json + std::string((8 - json.size() % 8) % 8, ' ');
  EXPECT_EQ(bytes, make_file(header, float_bytes({1.0f, -2.0f})));
  EXPECT_EQ((8 + header.size()) % 8, 0u);
}

TEST(Safetensors, ReadsAHandMadeFileWithMetadataAndI64) {
  const std::string path = temp_path("hand.safetensors");
  int64_t count = 1234567;
  const std::string data =
      float_bytes({0.5f, 1.5f, 2.5f}) + std::string(reinterpret_cast<char*>(&count), 8);
  write_bytes(path, make_file(R"({"__metadata__":{"format":"pt"},)"
                              R"("x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                              R"("n":{"dtype":"I64","shape":[],"data_offsets":[12,20]}})",
                              data));
  const auto loaded = load_safetensors(path);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].second.to_vector(), (std::vector<float>{0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(loaded[1].first, "n");
  EXPECT_EQ(loaded[1].second.dtype(), DType::f32);
  EXPECT_EQ(loaded[1].second.to_vector(), std::vector<float>{1234567.0f});
}

TEST(Safetensors, TruncatedFileNamesTheTensor) {
  const std::string path = temp_path("t.safetensors");
  save_safetensors(path, {{"a", Tensor::from_vector({4}, {1, 2, 3, 4})},
                          {"b", Tensor::from_vector({4}, {5, 6, 7, 8})}});
  const std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 3));
  const std::string e = error_of(path);
  EXPECT_NE(e.find("is truncated: tensor 'b'"), std::string::npos) << e;
  EXPECT_NE(e.find(path), std::string::npos) << e;
}

TEST(Safetensors, ShorterThanTheLengthField) {
  const std::string path = temp_path("short.safetensors");
  write_bytes(path, "abc");
  EXPECT_NE(error_of(path).find("shorter than the 8-byte header length"), std::string::npos);
}

TEST(Safetensors, HeaderLongerThanTheFile) {
  const std::string path = temp_path("long.safetensors");
  std::string bytes =
      make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", float_bytes({1}));
  bytes[0] = char(0xff), bytes[1] = char(0x7f);
  write_bytes(path, bytes);
  EXPECT_NE(error_of(path).find("exceeds the file's"), std::string::npos) << error_of(path);
}

TEST(Safetensors, CorruptHeaderJson) {
  const std::string path = temp_path("json.safetensors");
  write_bytes(path, make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offs)", "xxxx"));
  EXPECT_NE(error_of(path).find("corrupt safetensors header (not JSON"), std::string::npos)
      << error_of(path);
  write_bytes(path, make_file(R"([1, 2, 3])", ""));
  EXPECT_NE(error_of(path).find("not a JSON object"), std::string::npos) << error_of(path);
  write_bytes(path, make_file(R"({"a":{"dtype":"F32","shape":[1]}})", "xxxx"));
  EXPECT_NE(error_of(path).find("tensor 'a': its header entry lacks 'data_offsets'"),
            std::string::npos)
      << error_of(path);
  write_bytes(path,
              make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "xxxx"));
  EXPECT_NE(error_of(path).find("'shape' holds -1"), std::string::npos) << error_of(path);
}

TEST(Safetensors, UnsupportedDtype) {
  const std::string path = temp_path("dtype.safetensors");
  write_bytes(path, make_file(R"({"w":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", "xxxx"));
  const std::string e = error_of(path);
  EXPECT_NE(e.find("tensor 'w' has dtype I32; crema reads F32, F64, F16, BF16 and I64"),
            std::string::npos)
      << e;
}

TEST(Safetensors, OffsetsThatDisagreeWithTheShapeOrOverlap) {
  const std::string path = temp_path("offsets.safetensors");
  write_bytes(path, make_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                              std::string(24, 'x')));
  EXPECT_NE(error_of(path).find("(F32 [2, 3]) needs 24 bytes but its data_offsets [0, 20] span 20"),
            std::string::npos)
      << error_of(path);
  write_bytes(path, make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              std::string(12, 'x')));
  EXPECT_NE(error_of(path).find("'a' and 'b' overlap"), std::string::npos) << error_of(path);
}

TEST(Safetensors, MissingFileAndUnwritableDirectory) {
  EXPECT_NE(error_of(temp_path("none.safetensors")).find("cannot open"), std::string::npos);
  try {
    save_safetensors(temp_path("no/such/dir/x.safetensors"),
                     {{"a", Tensor::from_vector({1}, {1})}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
  }
}

TEST(AtomicWrite, ReplacesWholeAndLeavesNoTemporary) {
  temp_path("fresh");
  const std::string path = temp_path("state.json");
  write_file_atomic(path, "old contents");
  write_file_atomic(path, "new");
  EXPECT_EQ(read_bytes(path), "new");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // A failed write (its temporary cannot be created) leaves the old file as it was.
  std::filesystem::create_directories(path + ".tmp");
  std::filesystem::create_directories(path + ".tmp/blocker");
  EXPECT_THROW(write_file_atomic(path, "never"), Error);
  EXPECT_EQ(read_bytes(path), "new");
}

// A checkpoint carries the random generator as text; restored, it continues the same sequence,
// including the Gaussian spare kept between calls.
TEST(RandomState, RestoredGeneratorContinuesTheSequence) {
  Random a(42);
  for (int i = 0; i < 5; ++i) a.next();
  a.gaussian(0.0, 1.0);  // leaves a spare
  const std::string saved = a.state();
  Random b(7);
  b.set_state(saved);
  EXPECT_EQ(b.gaussian(0.0, 1.0), a.gaussian(0.0, 1.0));  // the spare
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(b.next(), a.next()) << i;
    ASSERT_EQ(b.gaussian(1.0, 2.0), a.gaussian(1.0, 2.0)) << i;
  }
  EXPECT_THROW(b.set_state("not a state"), Error);
  EXPECT_THROW(b.set_state(saved + " 5"), Error);
}

}  // namespace
}  // namespace crema
