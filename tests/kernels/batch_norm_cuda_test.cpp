// Batch normalization on CUDA: every version against ref<double> on awkward shapes (N = 1, two
// values per channel, [N, C] rows, 5 axes, a partial last chunk, channels cut into the most
// chunks) and LeNet's / VGG's sizes, with poisoned outputs: training forward (y, saved and running
// statistics, the batch counter), the inference forward, both backwards with and without affine
// parameters, parameter gradients accumulating, dx absent (split_rows, split_rows_vec and
// rows_tiled too, on every S = 1 shape; their fallback on misaligned pointers); in place;
// bit-identical repeats of the best version; the dispatch's device checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/batch_norm/batch_norm.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using cuda::BatchNormVersion;
using testing::host_values;
using testing::rel_error;

const std::vector<BatchNormVersion> kVersions = {BatchNormVersion::block_per_channel,
                                                 BatchNormVersion::split_channel};

std::string name(BatchNormVersion v) {
  return cuda::batch_norm_version_name(v);
}

// Inputs whose channels have different offsets, so that a wrong channel index shows.
std::vector<float> channel_values(Random& rng, const Shape& shape) {
  const BatchNormShape s = batch_norm_shape(shape);
  std::vector<float> v = testing::random_values(rng, shape_numel(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] += float((int64_t(i) / s.S) % s.C % 7) * 0.7f - 2.0f;
  return v;
}

// Device scratch for a version (at least one float, so the pointer is never null by accident).
Tensor workspace(Context& ctx, const BatchNormShape& s, BatchNormVersion v) {
  const size_t bytes = cuda::batch_norm_workspace_bytes(s, v);
  return ctx.empty({int64_t(bytes / 4 + 1)});
}

void check_version(Context& ctx, const Shape& shape, bool affine, BatchNormVersion version,
                   uint64_t seed) {
  SCOPED_TRACE(shape_str(shape) + (affine ? " affine " : " no affine ") + name(version));
  Random rng(seed);
  const BatchNormShape s = batch_norm_shape(shape);
  const int64_t C = s.C;
  const std::vector<float> xv = channel_values(rng, shape);
  const std::vector<float> dyv = testing::random_values(rng, shape_numel(shape));
  const std::vector<float> gv = testing::random_values(rng, C, 0.5, 1.5);
  const std::vector<float> bv = testing::random_values(rng, C);
  const std::vector<float> rmv = testing::random_values(rng, C);
  const std::vector<float> rvv = testing::random_values(rng, C, 0.5, 2.0);
  const std::vector<float> dgv = testing::random_values(rng, C),
                           dbv = testing::random_values(rng, C);
  const float eps = 1e-3f, momentum = 0.2f;

  const Tensor x = testing::to_device(ctx, shape, xv), dy = testing::to_device(ctx, shape, dyv);
  const Tensor gamma = testing::to_device(ctx, {C}, gv), beta = testing::to_device(ctx, {C}, bv);
  Tensor rm = testing::to_device(ctx, {C}, rmv), rv = testing::to_device(ctx, {C}, rvv);
  Tensor tracked = testing::to_device(ctx, {1}, {3.0f});
  Tensor y = testing::poisoned_device(ctx, shape), mean = testing::poisoned_device(ctx, {C});
  Tensor invstd = testing::poisoned_device(ctx, {C});
  Tensor scratch = workspace(ctx, s, version);
  const float* g = affine ? gamma.data<float>() : nullptr;
  const float* b = affine ? beta.data<float>() : nullptr;

  cuda::batch_norm_forward_training(s, x.data<float>(), g, b, eps, momentum, y.data<float>(),
                                    mean.data<float>(), invstd.data<float>(), rm.data<float>(),
                                    rv.data<float>(), tracked.data<float>(), scratch.data<float>(),
                                    version, ctx.stream());
  const std::vector<double> xd = testing::to_double(xv), dyd = testing::to_double(dyv);
  const std::vector<double> gd = testing::to_double(gv), bd = testing::to_double(bv);
  const double* gr = affine ? gd.data() : nullptr;
  const double* br = affine ? bd.data() : nullptr;
  std::vector<double> y_ref(xd.size()), mean_ref(static_cast<size_t>(C));
  std::vector<double> invstd_ref(static_cast<size_t>(C)), tracked_ref{3.0};
  std::vector<double> rm_ref = testing::to_double(rmv), rv_ref = testing::to_double(rvv);
  ref::batch_norm_forward_training(s, xd.data(), gr, br, double(eps), double(momentum),
                                   y_ref.data(), mean_ref.data(), invstd_ref.data(), rm_ref.data(),
                                   rv_ref.data(), tracked_ref.data());
  EXPECT_LT(rel_error(host_values(ctx, y), y_ref), 1e-5);
  EXPECT_LT(rel_error(host_values(ctx, mean), mean_ref), 1e-5);
  EXPECT_LT(rel_error(host_values(ctx, invstd), invstd_ref), 1e-5);
  EXPECT_LT(rel_error(host_values(ctx, rm), rm_ref), 1e-5);
  EXPECT_LT(rel_error(host_values(ctx, rv), rv_ref), 1e-5);
  EXPECT_EQ(host_values(ctx, tracked), std::vector<float>{4.0f});

  // The backward uses the statistics the GPU saved (as the layer does).
  const std::vector<double> md = testing::to_double(host_values(ctx, mean));
  const std::vector<double> id = testing::to_double(host_values(ctx, invstd));
  for (const bool batch_stats : {true, false}) {
    for (const bool want_dx : {true, false}) {
      SCOPED_TRACE(std::string(batch_stats ? "batch statistics" : "fixed statistics") +
                   (want_dx ? "" : ", no dx"));
      Tensor dx = testing::poisoned_device(ctx, shape);
      Tensor dgamma = testing::to_device(ctx, {C}, dgv), dbeta = testing::to_device(ctx, {C}, dbv);
      cuda::batch_norm_backward(
          s, x.data<float>(), dy.data<float>(), g, mean.data<float>(), invstd.data<float>(),
          batch_stats, want_dx ? dx.data<float>() : nullptr,
          affine ? dgamma.data<float>() : nullptr, affine ? dbeta.data<float>() : nullptr,
          scratch.data<float>(), version, ctx.stream());
      std::vector<double> dx_ref(xd.size()), dgamma_ref = testing::to_double(dgv),
                                             dbeta_ref = testing::to_double(dbv);
      ref::batch_norm_backward(s, xd.data(), dyd.data(), gr, md.data(), id.data(), batch_stats,
                               dx_ref.data(), dgamma_ref.data(), dbeta_ref.data());
      if (want_dx) {
        EXPECT_LT(rel_error(host_values(ctx, dx), dx_ref), 1e-5);
      } else {
        EXPECT_EQ(testing::count_nan(host_values(ctx, dx)), shape_numel(shape));  // untouched
      }
      if (affine) {
        EXPECT_LT(rel_error(host_values(ctx, dgamma), dgamma_ref), 1e-5);
        EXPECT_LT(rel_error(host_values(ctx, dbeta), dbeta_ref), 1e-5);
      }
    }
  }
}

const std::vector<Shape> kShapes = {
    {2, 1, 1, 1},       // two values in the only channel
    {1, 3, 7, 5},       // N = 1
    {5, 17},            // [N, C]
    {9, 300},           // many channels of few values
    {3000, 2},          // S = 1, a partial last chunk
    {3, 2, 2, 3, 5},    // 5 axes
    {7, 3, 33, 31},     // chunks that end inside a sample
    {64, 20, 24, 24},   // LeNet conv1's output
    {256, 16, 28, 28},  // VGG-like at 28x28, batch 256
    {128, 128, 7, 7},
    {1100, 1, 45, 45},  // more values than kMaxChunks chunks of kChunk: longer chunks
    {5, 2048},          // S = 1: rows of 64 tiles of 32 channels
    {300007, 3},        // S = 1, more rows than kMaxChunks chunks of kRowChunk: longer chunks
    {1001, 8},          // S = 1, f32 vectors of 4 channels: 2 threads a row
    {777, 12},          // 3 vectors a row: a tile of 8 channels and a partial one
    {515, 64},          // 16 threads a row
    {263, 256},         // 32 threads a row, a warp reads 512 bytes
    {4099, 44},         // 11 vectors a row: 8 threads a tile, a partial last tile
    // rows_tiled: tiles of whole rows (lanes = C / 4 in f32, at most 256), chunks of 16 rows a
    // thread
    {2, 2048},     // M = 2: 2 tiles of 256 lanes, one row each, one chunk
    {301, 2056},   // 514 vectors a row: 3 tiles of 172 lanes, the last one partial
    {17001, 516},  // 129 lanes, one row a step: 1001 chunks of 17 rows, the last of 1 row
    {70001, 8},    // 2 lanes, 128 rows a step: chunks of 2048 rows, a partial last one
    // the column sums by warp shuffles (lanes divides 32): 1, 8 and 32 lanes
    {4097, 4},
    {2001, 32},
    {1031, 128},
};

TEST(BatchNormCuda, EveryVersionMatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 1;
  for (const Shape& shape : kShapes) {
    std::vector<BatchNormVersion> versions = kVersions;
    if (batch_norm_shape(shape).S == 1) {
      for (const BatchNormVersion v : cuda::batch_norm_row_versions()) versions.push_back(v);
    }
    for (const BatchNormVersion v : versions) {
      check_version(ctx, shape, true, v, seed);
      if (shape_numel(shape) < 100000) check_version(ctx, shape, false, v, seed);
    }
    ++seed;
  }
}

TEST(BatchNormCuda, InferenceMatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // [N, C] with C % 4 == 0 runs rows_tiled's inference kernel (S == 1, 16-byte vectors).
  for (const Shape& shape : {Shape{1, 1, 1, 1}, Shape{5, 17}, Shape{3, 4, 5, 6},
                             Shape{64, 20, 24, 24}, Shape{7, 8}, Shape{301, 2056}}) {
    for (const bool affine : {true, false}) {
      SCOPED_TRACE(shape_str(shape) + (affine ? " affine" : " no affine"));
      Random rng(11);
      const BatchNormShape s = batch_norm_shape(shape);
      const int64_t C = s.C;
      const std::vector<float> xv = channel_values(rng, shape);
      const std::vector<float> gv = testing::random_values(rng, C, 0.5, 1.5);
      const std::vector<float> bv = testing::random_values(rng, C);
      const std::vector<float> rmv = testing::random_values(rng, C);
      const std::vector<float> rvv = testing::random_values(rng, C, 0.5, 2.0);
      const Tensor x = testing::to_device(ctx, shape, xv);
      const Tensor gamma = testing::to_device(ctx, {C}, gv),
                   beta = testing::to_device(ctx, {C}, bv);
      const Tensor rm = testing::to_device(ctx, {C}, rmv), rv = testing::to_device(ctx, {C}, rvv);
      Tensor y = testing::poisoned_device(ctx, shape), mean = testing::poisoned_device(ctx, {C});
      Tensor invstd = testing::poisoned_device(ctx, {C});
      cuda::batch_norm_forward_inference(s, x.data<float>(), affine ? gamma.data<float>() : nullptr,
                                         affine ? beta.data<float>() : nullptr, rm.data<float>(),
                                         rv.data<float>(), 1e-5f, y.data<float>(),
                                         mean.data<float>(), invstd.data<float>(), ctx.stream());
      const std::vector<double> xd = testing::to_double(xv), gd = testing::to_double(gv);
      const std::vector<double> bd = testing::to_double(bv), rmd = testing::to_double(rmv);
      const std::vector<double> rvd = testing::to_double(rvv);
      std::vector<double> y_ref(xd.size()), mean_ref(static_cast<size_t>(C));
      std::vector<double> invstd_ref(static_cast<size_t>(C));
      ref::batch_norm_forward_inference(s, xd.data(), affine ? gd.data() : nullptr,
                                        affine ? bd.data() : nullptr, rmd.data(), rvd.data(), 1e-5,
                                        y_ref.data(), mean_ref.data(), invstd_ref.data());
      EXPECT_LT(rel_error(host_values(ctx, y), y_ref), 1e-6);
      EXPECT_LT(rel_error(host_values(ctx, mean), mean_ref), 1e-7);
      EXPECT_LT(rel_error(host_values(ctx, invstd), invstd_ref), 1e-6);
    }
  }
}

// Training forward and backward of the best version through the Tensor API, as a vector of all
// outputs.
std::vector<float> run_best(Context& ctx, const Shape& shape, bool in_place) {
  Random rng(21);
  const int64_t C = shape[1];
  const Tensor x = testing::to_device(ctx, shape, channel_values(rng, shape));
  const Tensor dy = testing::to_device(ctx, shape, testing::random_values(rng, shape_numel(shape)));
  const Tensor gamma = testing::to_device(ctx, {C}, testing::random_values(rng, C, 0.5, 1.5));
  const Tensor beta = testing::to_device(ctx, {C}, testing::random_values(rng, C));
  Tensor rm = ctx.zeros({C}), rv = ctx.zeros({C}), tracked = ctx.zeros({1});
  Tensor mean = ctx.empty({C}), invstd = ctx.empty({C});
  Tensor dgamma = ctx.zeros({C}), dbeta = ctx.zeros({C});
  Tensor y = in_place ? x.clone() : testing::poisoned_device(ctx, shape);
  Tensor dx = in_place ? dy.clone() : testing::poisoned_device(ctx, shape);
  const Tensor& x_in = in_place ? y : x;
  batch_norm_forward_training(ctx, x_in, gamma, beta, 1e-5f, 0.1f, y, mean, invstd, rm, rv,
                              tracked);
  const std::vector<float> yv = host_values(ctx, y);
  // In place, x is gone: the backward reads the original x (the layer keeps a copy for this).
  batch_norm_backward(ctx, x, in_place ? dx : dy, gamma, mean, invstd, true, dx, dgamma, dbeta);
  std::vector<float> all = yv;
  for (const Tensor* t : {&dx, &mean, &invstd, &rm, &rv, &dgamma, &dbeta}) {
    const std::vector<float> v = host_values(ctx, *t);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEST(BatchNormCuda, BestIsDeterministicAndWorksInPlace) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const Shape& shape :
       {Shape{64, 20, 24, 24}, Shape{256, 500}, Shape{3, 5, 7, 2}, Shape{1001, 2048}}) {
    SCOPED_TRACE(shape_str(shape));
    const std::vector<float> first = run_best(ctx, shape, false);
    EXPECT_EQ(testing::count_nan(first), 0);
    EXPECT_TRUE(testing::same_bits(first, run_best(ctx, shape, false)));
    EXPECT_TRUE(testing::same_bits(first, run_best(ctx, shape, true)));
  }
}

// A version's y, statistics, dx and parameter gradients with x, y, dy and dx at `offset` floats
// into their buffers (an offset of 1 leaves them 4-byte, not 16-byte, aligned).
std::vector<float> run_at_offset(Context& ctx, const Shape& shape, int64_t offset,
                                 BatchNormVersion version) {
  Random rng(31);
  const BatchNormShape s = batch_norm_shape(shape);
  const int64_t C = s.C, n = shape_numel(shape);
  std::vector<float> xv(size_t(offset), 0.0f), dyv(size_t(offset), 0.0f);
  const std::vector<float> xs = channel_values(rng, shape), dys = testing::random_values(rng, n);
  xv.insert(xv.end(), xs.begin(), xs.end());
  dyv.insert(dyv.end(), dys.begin(), dys.end());
  const Tensor x = testing::to_device(ctx, {n + offset}, xv);
  const Tensor dy = testing::to_device(ctx, {n + offset}, dyv);
  const Tensor gamma = testing::to_device(ctx, {C}, testing::random_values(rng, C, 0.5, 1.5));
  const Tensor beta = testing::to_device(ctx, {C}, testing::random_values(rng, C));
  Tensor y = testing::poisoned_device(ctx, {n + offset}),
         dx = testing::poisoned_device(ctx, {n + offset});
  Tensor mean = ctx.empty({C}), invstd = ctx.empty({C}), dgamma = ctx.zeros({C}),
         dbeta = ctx.zeros({C});
  Tensor scratch = workspace(ctx, s, version);
  cuda::batch_norm_forward_training(s, x.data<float>() + offset, gamma.data<float>(),
                                    beta.data<float>(), 1e-5f, 0.1f, y.data<float>() + offset,
                                    mean.data<float>(), invstd.data<float>(), nullptr, nullptr,
                                    nullptr, scratch.data<float>(), version, ctx.stream());
  cuda::batch_norm_backward(s, x.data<float>() + offset, dy.data<float>() + offset,
                            gamma.data<float>(), mean.data<float>(), invstd.data<float>(), true,
                            dx.data<float>() + offset, dgamma.data<float>(), dbeta.data<float>(),
                            scratch.data<float>(), version, ctx.stream());
  std::vector<float> all;
  for (const Tensor* t : {&y, &dx, &mean, &invstd, &dgamma, &dbeta}) {
    const std::vector<float> v = host_values(ctx, *t);
    all.insert(all.end(), v.begin() + (t == &y || t == &dx ? offset : 0), v.end());
  }
  return all;
}

// Pointers that are not 16-byte aligned take split_rows' scalar kernels: its very bits.
TEST(BatchNormCuda, VectorVersionsFallBackOnMisalignedPointers) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const Shape& shape : {Shape{515, 64}, Shape{1001, 8}}) {
    SCOPED_TRACE(shape_str(shape));
    const std::vector<float> scalar = run_at_offset(ctx, shape, 1, BatchNormVersion::split_rows);
    EXPECT_EQ(testing::count_nan(scalar), 0);
    for (const BatchNormVersion v :
         {BatchNormVersion::split_rows_vec, BatchNormVersion::rows_tiled}) {
      SCOPED_TRACE(name(v));
      EXPECT_TRUE(testing::same_bits(scalar, run_at_offset(ctx, shape, 1, v)));
    }
  }
}

TEST(BatchNormCuda, RejectsTensorsOnAnotherDevice) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Shape shape{2, 3, 4};
  Tensor host_x(shape), y = ctx.empty(shape), mean = ctx.empty({3}), invstd = ctx.empty({3}), none;
  host_x.fill(1.0f);
  try {
    batch_norm_forward_training(ctx, host_x, none, none, 1e-5f, 0.1f, y, mean, invstd, none, none,
                                none);
    ADD_FAILURE() << "accepted a host tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x is"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::kernels
