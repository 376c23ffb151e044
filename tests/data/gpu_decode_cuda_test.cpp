// decode: gpu (data/gpu_decode.h) against the CPU path:
//   - the plan kernels (data/gpu/pixel_plan_cuda.h) against run_pixel_plan on awkward sizes: the
//     same operations in the same order, each rounded alone: within 2 ulp (1e-6 relative; a
//     contrast mean is a double sum in another order);
//   - nvJPEG against libjpeg-turbo on photo-like files: the decoders' IDCT and chroma upsampling
//     differ, so pixels may differ by a few levels: bound kDecodeMean (mean) and kDecodeMax
//     (largest) levels of 255, printed as measured;
//   - the loader: the same seed gives the CPU path's batches (reduced_decoding off: the GPU
//     decodes whole files) within those bounds through the resize, labels exactly, and the same
//     batches bit for bit run to run; the files nvJPEG refuses (PNG named .jpg, CMYK,
//     progressive where the hardware refuses it) decoded on the CPU, a 1 x 1 JPEG either way;
//     bad files (truncated, a 20000 x 20000 header, garbage) named or skipped as on the CPU.
#include <gtest/gtest.h>

#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/random.h"
#include "data/gpu/pixel_plan_cuda.h"
#include "data/gpu_decode.h"
#include "data/image_files.h"
#include "data/loader.h"
#include "data/transform.h"
#include "tests/data/data_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::data {
namespace {

using testing::error_of;
using testing::pattern_image;

constexpr double kDecodeMean = 1.0;  // levels of 255
constexpr double kDecodeMax = 16.0;

std::vector<std::shared_ptr<const Transform>> make_all(const std::vector<TransformSpec>& specs) {
  std::vector<std::shared_ptr<const Transform>> out;
  for (const TransformSpec& spec : specs) out.push_back(make_transform(spec));
  return out;
}

// A photo-like C x H x W image: smooth shading, an edge, and texture, 0..255.
Image photo_image(int64_t channels, int64_t height, int64_t width, int salt) {
  Image image;
  image.reset({channels, height, width});
  Random random(uint64_t(salt) + 1);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        double v = 90 + 60 * std::sin(0.07 * double(x + 3 * salt) + 0.5 * double(c)) +
                   40 * std::cos(0.05 * double(y) * (1 + 0.3 * double(c)));
        if (x > width / 2 + salt % 7) v += 30;
        v += 12 * (random.uniform01() - 0.5);
        image.pixels[size_t((c * height + y) * width + x)] = float(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return image;
}

// libjpeg's encoding of a 3-channel image: progressive, or as CMYK (inks 255 - RGB, K 0).
std::string libjpeg_bytes(const Image& image, bool progressive, bool cmyk) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  const int H = int(image.height()), W = int(image.width()), plane = H * W;
  info.image_width = JDIMENSION(W);
  info.image_height = JDIMENSION(H);
  info.input_components = cmyk ? 4 : 3;
  info.in_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, 90, TRUE);
  if (progressive) jpeg_simple_progression(&info);
  jpeg_start_compress(&info, TRUE);
  std::vector<uint8_t> row(size_t(W * info.input_components));
  while (info.next_scanline < info.image_height) {
    const int y = int(info.next_scanline);
    for (int x = 0; x < W; ++x) {
      for (int c = 0; c < 3; ++c) {
        const auto v = uint8_t(image.pixels[size_t(c * plane + y * W + x)]);
        row[size_t(x * info.input_components + c)] = cmyk ? uint8_t(255 - v) : v;
      }
      if (cmyk) row[size_t(x * 4 + 3)] = 0;
    }
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&info, rows, 1);
  }
  jpeg_finish_compress(&info);
  std::string bytes(reinterpret_cast<char*>(buffer), size);
  jpeg_destroy_compress(&info);
  std::free(buffer);
  return bytes;
}

std::vector<float> to_host(const Tensor& t) {
  std::vector<float> host(size_t(t.numel()));
  gpu::copy(host.data(), t.raw(), t.nbytes(), nullptr);
  return host;
}

// Mean and largest |a - b|, after scaling by `unit` (levels of 255 per value unit).
struct Diff {
  double mean = 0, max = 0;
  size_t where = 0;
};
Diff diff_of(const std::vector<float>& a, const std::vector<float>& b, double unit) {
  Diff d;
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double e = std::fabs(double(a[i]) - double(b[i])) * unit;
    d.mean += e;
    if (e > d.max) d.max = e, d.where = i;
  }
  d.mean /= double(std::max<size_t>(a.size(), 1));
  return d;
}

TEST(GpuDecodeCuda, PlanKernelsMatchTheReferenceOnAwkwardShapes) {
  CREMA_REQUIRE_CUDA();
  gpu::use_device(0);
  TransformSpec jitter(
      "color_jitter", {},
      {{"brightness", {0.4f}}, {"contrast", {0.4f}}, {"saturation", {0.4f}}, {"hue", {0.5f}}});
  const std::vector<std::vector<TransformSpec>> pipelines = {
      {{"random_resized_crop", {29, 23}},
       {"horizontal_flip"},
       {"scale", {0.00392157f}},
       {"normalize", {}, {{"mean", {0.485f, 0.456f, 0.406f}}, {"std", {0.229f, 0.224f, 0.225f}}}}},
      {{"resize", {17}}, {"center_crop", {19, 15}}, {"horizontal_flip"}},
      {{"random_crop", {21, 18}, {{"padding", {3}}}}, {"scale", {0.00392157f}}, jitter, jitter},
  };
  const std::vector<Size2> sizes = {{37, 53}, {64, 41}, {23, 100}, {75, 75}, {31, 29}};
  for (int64_t channels : {3, 1}) {
    for (const auto& specs : pipelines) {
      const auto transforms = make_all(specs);
      std::vector<Image> sources;
      std::vector<PixelPlan> plans;
      std::vector<int64_t> offsets;
      int64_t total = 0;
      for (size_t b = 0; b < sizes.size(); ++b) {
        sources.push_back(pattern_image(channels, sizes[b].height, sizes[b].width, int(b)));
        plans.push_back(identity_plan(channels, sizes[b]));
        Random random(100 + b);
        for (const auto& t : transforms) t->plan(plans.back(), random);
        offsets.push_back(total);
        total += channels * sizes[b].height * sizes[b].width + 13;  // unaligned on purpose
      }
      std::vector<uint8_t> bytes(static_cast<size_t>(total));
      for (size_t b = 0; b < sources.size(); ++b) {
        for (size_t i = 0; i < sources[b].pixels.size(); ++i) {
          bytes[size_t(offsets[b]) + i] = uint8_t(sources[b].pixels[i]);
        }
      }
      const int64_t out_numel = plans[0].channels * plans[0].height() * plans[0].width();
      void* d_sources = gpu::device_allocate(bytes.size());
      void* d_out = gpu::device_allocate(size_t(out_numel) * sources.size() * sizeof(float));
      gpu::copy(d_sources, bytes.data(), bytes.size(), nullptr);
      gpu::Stream stream = gpu::create_stream();
      cuda::PlanRunner runner;
      std::vector<const PixelPlan*> pointers;
      for (const PixelPlan& p : plans) pointers.push_back(&p);
      runner.run(pointers, offsets, static_cast<const uint8_t*>(d_sources),
                 static_cast<float*>(d_out), stream);
      gpu::synchronize(stream);
      std::vector<float> got(size_t(out_numel) * sources.size());
      gpu::copy(got.data(), d_out, got.size() * sizeof(float), nullptr);
      gpu::destroy_stream(stream);
      gpu::device_free(d_sources);
      gpu::device_free(d_out);
      for (size_t b = 0; b < sources.size(); ++b) {
        Image want;
        run_pixel_plan(plans[b], sources[b], want);
        for (int64_t i = 0; i < out_numel; ++i) {
          const float g = got[size_t(int64_t(b) * out_numel + i)], w = want.pixels[size_t(i)];
          ASSERT_NEAR(g, w, 1e-6f * std::max(1.0f, std::fabs(w)))
              << transforms.front()->description() << ", " << channels << " channels, sample " << b
              << ", first mismatch at flat index " << i << " of " << shape_str(want.shape);
        }
      }
    }
  }
}

class GpuDecode : public testing::DataFiles {
 protected:
  // A folder set/ of photo-like JPEGs in two classes, of assorted sizes.
  void write_photos(int count) const {
    for (const char* folder : {"set/a", "set/b"}) std::filesystem::create_directories(path(folder));
    for (int i = 0; i < count; ++i) {
      const int64_t height = 40 + (i * 17) % 61, width = 40 + (i * 29) % 67;
      write_image_file(
          path("set/" + std::string(i % 2 ? "b" : "a") + "/" + std::to_string(i) + ".jpg"),
          photo_image(3, height, width, i), ImageFormat::jpeg, 85 + i % 10);
    }
  }
};

TEST_F(GpuDecode, NvjpegMatchesLibjpegTurboWithinTheBound) {
  CREMA_REQUIRE_CUDA();
  if (!gpu_decoding_built()) GTEST_SKIP() << "a build without nvJPEG";
  gpu::use_device(0);
  auto decoder = make_gpu_batch_decoder(0, 3);
  const std::vector<Size2> sizes = {{375, 500}, {333, 250}, {97, 131}, {64, 64}};
  for (size_t k = 0; k < sizes.size() + 1; ++k) {
    const bool gray = k == sizes.size();
    const Size2 size = gray ? Size2{120, 90} : sizes[k];
    const std::string file = path("photo" + std::to_string(k) + ".jpg");
    write_image_file(file, photo_image(gray ? 1 : 3, size.height, size.width, int(k)),
                     ImageFormat::jpeg, 90);
    std::vector<GpuSample> samples(1);
    samples[0].file.bytes = read_image_bytes(file);
    const std::vector<uint8_t>& bytes = samples[0].file.bytes;
    const auto accepted = decoder->accepts(bytes.data(), bytes.size());
    ASSERT_TRUE(accepted.has_value()) << file;
    EXPECT_EQ(accepted->height, size.height);
    EXPECT_EQ(accepted->width, size.width);
    samples[0].on_gpu = true;
    samples[0].plan = identity_plan(3, size);
    Tensor out({1, 3, size.height, size.width}, DType::f32, Device::cuda(0),
               &gpu_batch_allocator(0));
    ASSERT_TRUE(decoder->run(samples, out.data<float>()));
    Image cpu;
    read_image_file(file, 3, cpu);
    const Diff d = diff_of(to_host(out), cpu.pixels, 1.0);
    std::printf("nvJPEG vs libjpeg-turbo, %s %lld x %lld: mean %.3f, max %.0f levels\n",
                gray ? "gray" : "4:2:0", (long long)size.height, (long long)size.width, d.mean,
                d.max);
    EXPECT_LE(d.mean, kDecodeMean) << file;
    EXPECT_LE(d.max, kDecodeMax) << file << " at flat index " << d.where;
  }
}

DataLoaderOptions photo_options(int gpu) {
  DataLoaderOptions options;
  options.batch_size = 8;
  options.shuffle = true;
  options.seed = 7;
  options.num_workers = 2;
  options.reduced_decoding = false;
  options.gpu_decode = gpu;
  options.transforms = make_all(
      {{"random_resized_crop", {32}},
       {"horizontal_flip"},
       {"scale", {0.00392157f}},
       {"normalize", {}, {{"mean", {0.485f, 0.456f, 0.406f}}, {"std", {0.229f, 0.224f, 0.225f}}}}});
  return options;
}

// The batches of two loaders agree: labels exactly, pixels within the decode bounds (in levels
// of 255: after normalize a level is 1 / (255 std)).
void expect_same_batches(DataLoader& cpu, DataLoader& gpu, int batches, double unit) {
  for (int b = 0; b < batches; ++b) {
    const Batch want = cpu.next(), got = gpu.next();
    ASSERT_EQ(got.data.shape(), want.data.shape());
    EXPECT_TRUE(got.data.device().is_cuda());
    EXPECT_EQ(got.labels.to_vector(), want.labels.to_vector()) << "batch " << b;
    const Diff d = diff_of(to_host(got.data), want.data.to_vector(), unit);
    std::printf("loader batch %d, decode: gpu vs cpu: mean %.3f, max %.1f levels\n", b, d.mean,
                d.max);
    EXPECT_LE(d.mean, kDecodeMean) << "batch " << b;
    EXPECT_LE(d.max, kDecodeMax) << "batch " << b << " at flat index " << d.where;
  }
}

TEST_F(GpuDecode, SameSeedGivesTheCpuPathsBatchesAndTheSameBatchesRunToRun) {
  CREMA_REQUIRE_CUDA();
  if (!gpu_decoding_built()) GTEST_SKIP() << "a build without nvJPEG";
  gpu::use_device(0);
  write_photos(30);
  auto dataset = std::shared_ptr<const Dataset>(load_image_folder(path("set"), 3));
  DataLoader cpu(dataset, photo_options(-1));
  DataLoader gpu(dataset, photo_options(0));
  expect_same_batches(cpu, gpu, 6, 255.0 * 0.229);  // 6 batches: into the second epoch

  DataLoaderOptions one_worker = photo_options(0);
  one_worker.num_workers = 0;
  DataLoader first(dataset, photo_options(0)), second(dataset, one_worker);
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(to_host(first.next().data), to_host(second.next().data)) << "batch " << b;
  }
}

TEST_F(GpuDecode, FilesNvjpegRefusesAreDecodedOnTheCpu) {
  CREMA_REQUIRE_CUDA();
  if (!gpu_decoding_built()) GTEST_SKIP() << "a build without nvJPEG";
  gpu::use_device(0);
  write_photos(6);
  const Image photo = photo_image(3, 48, 56, 3);
  write_image_file(path("png_named.png"), photo, ImageFormat::png);
  write_file("set/a/png_named.jpg", testing::read_file(path("png_named.png")));
  write_file("set/b/cmyk.jpg", libjpeg_bytes(photo, false, true));
  write_file("set/a/progressive.jpg", libjpeg_bytes(photo, true, false));
  write_image_file(path("set/b/one_pixel.jpg"), photo_image(3, 1, 1, 0), ImageFormat::jpeg, 90);
  auto dataset = std::shared_ptr<const Dataset>(load_image_folder(path("set"), 3));
  DataLoaderOptions cpu_options = photo_options(-1), gpu_options = photo_options(0);
  cpu_options.shuffle = gpu_options.shuffle = false;
  cpu_options.batch_size = gpu_options.batch_size = 10;
  DataLoader cpu(dataset, cpu_options), gpu(dataset, gpu_options);
  expect_same_batches(cpu, gpu, 2, 255.0 * 0.229);
}

TEST_F(GpuDecode, BadFilesAreNamedOrSkippedAsOnTheCpu) {
  CREMA_REQUIRE_CUDA();
  if (!gpu_decoding_built()) GTEST_SKIP() << "a build without nvJPEG";
  gpu::use_device(0);
  write_photos(14);
  const std::string whole = testing::read_file(path("set/a/0.jpg"));
  std::string bomb = whole;
  for (size_t i = 0; i + 8 < bomb.size(); ++i) {  // the SOF0 frame size: 20000 x 20000
    if (uint8_t(bomb[i]) == 0xFF && uint8_t(bomb[i + 1]) == 0xC0) {
      bomb[i + 5] = char(20000 >> 8), bomb[i + 6] = char(20000 & 255);
      bomb[i + 7] = char(20000 >> 8), bomb[i + 8] = char(20000 & 255);
      break;
    }
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"set/a/truncated.jpg", whole.substr(0, whole.size() / 2)},
      {"set/b/bomb.jpg", bomb},
      {"set/b/garbage.jpg", "\xFF\xD8 not a JPEG at all \xFF\xD9"}};
  for (const auto& [name, bytes] : bad) write_file(name, bytes);
  auto dataset = std::shared_ptr<const Dataset>(load_image_folder(path("set"), 3));
  for (const auto& [name, bytes] : bad) {
    // Alone in a batch of its own: the error names it.
    std::vector<int64_t> only;
    for (int64_t i = 0; i < dataset->size(); ++i) {
      if (dataset->sample_name(i).find(name) != std::string::npos) only.push_back(i);
    }
    ASSERT_EQ(only.size(), 1u) << name;
    DataLoaderOptions options = photo_options(0);
    options.shuffle = false;
    options.batch_size = 1;
    options.num_workers = 0;
    DataLoader loader(dataset, options);
    loader.seek(0, only[0]);
    EXPECT_CONTAINS(error_of([&] { loader.next(); }), name);
  }
  DataLoaderOptions cpu_options = photo_options(-1), gpu_options = photo_options(0);
  cpu_options.skip_bad = gpu_options.skip_bad = true;
  DataLoader cpu(dataset, cpu_options), gpu(dataset, gpu_options);
  expect_same_batches(cpu, gpu, 2, 255.0 * 0.229);
  EXPECT_EQ(gpu.skipped_samples(), cpu.skipped_samples());
}

}  // namespace
}  // namespace crema::data
