// CUDA im2col / col2im against ref:: on awkward geometries, batched over images, with an image
// stride wider than one image (a group's channels inside a wider tensor) and a col row stride
// wider than the batch's columns: the padding columns and the other channels must stay untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/im2col/im2col.h"
#include "tests/kernels/im2col_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kImages = 3;
constexpr int64_t kExtraChannels = 2;  // one before the patches' channels, one after
constexpr int64_t kExtraColumns = 5;   // ldcol = images * P * Q + 5 (col2im)

using testing::geometries;

std::string describe(const Im2colGeometry& g) {
  return "C=" + std::to_string(g.C) + " " + std::to_string(g.H) + "x" + std::to_string(g.W) +
         " window " + std::to_string(g.R) + "x" + std::to_string(g.S) + " pad " +
         std::to_string(g.pad_h) + "," + std::to_string(g.pad_w) + " stride " +
         std::to_string(g.stride_h) + "," + std::to_string(g.stride_w) + " dilation " +
         std::to_string(g.dilation_h) + "," + std::to_string(g.dilation_w);
}

std::vector<float> random_values(Random& rng, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = float(rng.uniform(-1.0, 1.0));
  return v;
}

Tensor upload(Context& ctx, const std::vector<float>& host) {
  Tensor t = ctx.empty({int64_t(host.size())});
  t.copy_from(Tensor::from_vector({int64_t(host.size())}, host));
  return t;
}

// Sizes of the batched layout; ldcol = the batch's columns + extra_columns.
struct Layout {
  int64_t HW, PQ, rows, ldcol, image_stride;
  explicit Layout(const Im2colGeometry& g, int64_t extra_columns = kExtraColumns)
      : HW(g.H * g.W),
        PQ(g.P() * g.Q()),
        rows(g.col_rows()),
        ldcol(kImages * PQ + extra_columns),
        image_stride((g.C + kExtraChannels) * HW) {}
};

// Extra columns that make ldcol a multiple of 4 plus 4 (row_vectors' 16-byte stores), and 5.
int64_t aligning_columns(const Im2colGeometry& g) {
  const int64_t cols = kImages * g.P() * g.Q();
  return 4 + (4 - cols % 4) % 4;
}

const cuda::Im2colVersion kVersions[] = {cuda::Im2colVersion::thread_per_entry,
                                         cuda::Im2colVersion::row_vectors};

TEST(Im2colCuda, Im2colMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(1);
  std::vector<Im2colGeometry> shapes = geometries();
  shapes.push_back({5, 17, 19, 3, 3, 1, 1});  // 3 * 323 columns: full float4 pairs and a tail
  for (const Im2colGeometry& g : shapes) {
    for (const int64_t extra : {kExtraColumns, aligning_columns(g)}) {
      for (const cuda::Im2colVersion version : kVersions) {
        const Layout l(g, extra);
        const std::vector<float> im = random_values(rng, kImages * l.image_stride);
        // Expected: image n's columns from ref::im2col, padding columns still NaN.
        std::vector<float> expected(size_t(l.rows * l.ldcol), kNaN), one(size_t(l.rows * l.PQ));
        for (int64_t n = 0; n < kImages; ++n) {
          ref::im2col<float>(g, im.data() + n * l.image_stride + l.HW, one.data());
          for (int64_t r = 0; r < l.rows; ++r) {
            for (int64_t j = 0; j < l.PQ; ++j) {
              expected[size_t(r * l.ldcol + n * l.PQ + j)] = one[size_t(r * l.PQ + j)];
            }
          }
        }
        const Tensor im_dev = upload(ctx, im);
        Tensor col = ctx.empty({l.rows * l.ldcol});
        ctx.fill(col, kNaN);
        cuda::im2col(g, kImages, im_dev.data<float>() + l.HW, l.image_stride, col.data<float>(),
                     l.ldcol, version, ctx.stream());
        ctx.synchronize();
        const std::vector<float> out = col.to_vector();
        int64_t wrong = 0;
        for (size_t i = 0; i < out.size(); ++i) {
          // A copy: bit-exact, NaN exactly where NaN is expected.
          wrong += std::isnan(expected[i]) ? !std::isnan(out[i]) : out[i] != expected[i];
        }
        EXPECT_EQ(wrong, 0) << describe(g) << " ldcol " << l.ldcol << " version " << int(version);
      }
    }
  }
}

TEST(Im2colCuda, Col2imAccumulatesLikeReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(2);
  for (const Im2colGeometry& g : geometries()) {
    const Layout l(g);
    std::vector<float> col = random_values(rng, l.rows * l.ldcol);
    for (int64_t r = 0; r < l.rows; ++r) {
      for (int64_t j = kImages * l.PQ; j < l.ldcol; ++j) col[size_t(r * l.ldcol + j)] = kNaN;
    }
    const std::vector<float> im0 = random_values(rng, kImages * l.image_stride);
    // Expected: im0 plus ref::col2im of each image's columns on its channels, in double.
    std::vector<double> expected(im0.begin(), im0.end());
    std::vector<double> one(size_t(l.rows * l.PQ));
    for (int64_t n = 0; n < kImages; ++n) {
      for (int64_t r = 0; r < l.rows; ++r) {
        for (int64_t j = 0; j < l.PQ; ++j) {
          one[size_t(r * l.PQ + j)] = col[size_t(r * l.ldcol + n * l.PQ + j)];
        }
      }
      ref::col2im<double>(g, one.data(), expected.data() + n * l.image_stride + l.HW);
    }
    const Tensor col_dev = upload(ctx, col);
    Tensor im = upload(ctx, im0);
    cuda::col2im(g, kImages, col_dev.data<float>(), l.ldcol, im.data<float>() + l.HW,
                 l.image_stride, ctx.stream());
    ctx.synchronize();
    const std::vector<float> out = im.to_vector();
    double diff = 0, norm = 0;
    int64_t touched = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t channel = int64_t(i) % l.image_stride / l.HW;
      if (channel == 0 || channel > g.C) {
        touched += out[i] != im0[i];  // channels outside the patches' block stay as they were
        continue;
      }
      diff += (out[i] - expected[i]) * (out[i] - expected[i]);
      norm += expected[i] * expected[i];
    }
    EXPECT_EQ(touched, 0) << describe(g);
    EXPECT_LT(std::sqrt(diff), 1e-6 * std::sqrt(norm)) << describe(g);
  }
}

}  // namespace
}  // namespace crema::kernels
