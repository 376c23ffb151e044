// crema bench without a device: shapes and options as the command line spells them, their
// errors, the default lists, and the table's arithmetic and exit status.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "core/error.h"
#include "tests/support/error_text.h"

namespace crema::bench {
namespace {

using crema::testing::error_of;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(BenchShapes, GemmShapes) {
  GemmShape s = parse_gemm_shape("8192,4096,1024");
  EXPECT_EQ(s.M, 8192);
  EXPECT_EQ(s.N, 4096);
  EXPECT_EQ(s.K, 1024);
  EXPECT_FALSE(s.trans_a);
  EXPECT_FALSE(s.trans_b);
  EXPECT_EQ(s.str(), "8192,4096,1024,NN");
  s = parse_gemm_shape("3,5,7,TN");
  EXPECT_TRUE(s.trans_a);
  EXPECT_FALSE(s.trans_b);
  s = parse_gemm_shape("3,5,7,NT");
  EXPECT_FALSE(s.trans_a);
  EXPECT_TRUE(s.trans_b);
  EXPECT_EQ(parse_gemm_shape(s.str()).str(), "3,5,7,NT");
}

TEST(BenchShapes, GemmShapeErrorsSayTheFormat) {
  for (const char* bad : {"", "8192", "1,2", "1,2,3,4,5", "0,2,3", "1,-2,3", "1,2,x", "1,2,3,NX",
                          "1,2,3,", "1,2,3,TTT"}) {
    const std::string message = error_of([&] { parse_gemm_shape(bad); });
    EXPECT_TRUE(contains(message, std::string("--shape '") + bad + "'")) << message;
    EXPECT_TRUE(contains(message, "M,N,K[,NN|NT|TN|TT]")) << message;
  }
}

TEST(BenchShapes, ConvShapesWithEveryOption) {
  ConvShape s = parse_conv_shape("64,64,56,56,64,3,p1");
  EXPECT_EQ(s.name, "64,64,56,56,64,3,p1");
  EXPECT_EQ(s.g.N, 64);
  EXPECT_EQ(s.g.R, 3);
  EXPECT_EQ(s.g.S, 3);
  EXPECT_EQ(s.g.pad_h, 1);
  EXPECT_EQ(s.g.pad_w, 1);
  EXPECT_EQ(s.g.stride_h, 1);
  EXPECT_EQ(s.g.groups, 1);

  s = parse_conv_shape("2,6,17,13,4,5x3,s2x1,p2x0,d1x2,g2");
  EXPECT_EQ(s.g.C, 6);
  EXPECT_EQ(s.g.H, 17);
  EXPECT_EQ(s.g.W, 13);
  EXPECT_EQ(s.g.K, 4);
  EXPECT_EQ(s.g.R, 5);
  EXPECT_EQ(s.g.S, 3);
  EXPECT_EQ(s.g.stride_h, 2);
  EXPECT_EQ(s.g.stride_w, 1);
  EXPECT_EQ(s.g.pad_h, 2);
  EXPECT_EQ(s.g.pad_w, 0);
  EXPECT_EQ(s.g.dilation_h, 1);
  EXPECT_EQ(s.g.dilation_w, 2);
  EXPECT_EQ(s.g.groups, 2);
}

TEST(BenchShapes, ConvShapeErrors) {
  for (const char* bad :
       {"64,64,56,56,64", "64,64,56,56,64,3,q1", "64,64,56,56,64,3x,p1", "64,64,56,56,64,3,s0",
        "64,64,56,56,64,3,g2x1", "a,64,56,56,64,3", "resnet 3x3"}) {
    const std::string message = error_of([&] { parse_conv_shape(bad); });
    EXPECT_TRUE(contains(message, std::string("--shape '") + bad + "'")) << message;
    EXPECT_TRUE(contains(message, "N,C,H,W,K,R[xS]")) << message;
    EXPECT_TRUE(contains(message, "resnet 3x3 64->64 56x56 n64")) << message;  // the names
  }
  // Parsed, but a geometry that cannot work: the geometry's own message.
  EXPECT_TRUE(contains(error_of([] { parse_conv_shape("1,6,8,8,4,3,g4"); }), "groups must divide"));
  EXPECT_TRUE(
      contains(error_of([] { parse_conv_shape("1,3,4,4,4,7"); }), "larger than the padded"));
}

TEST(BenchShapes, DefaultConvShapesAreThePeers) {
  const std::vector<ConvShape> shapes = default_conv_shapes();
  ASSERT_EQ(shapes.size(), 6u);
  EXPECT_EQ(shapes[0].name, "resnet 3x3 64->64 56x56 n64");
  EXPECT_EQ(shapes[5].name, "lenet 5x5 20->50 12x12 n256");
  const ConvShape stem = parse_conv_shape("resnet 7x7s2 3->64 224x224 n64");
  EXPECT_EQ(stem.g.N, 64);
  EXPECT_EQ(stem.g.C, 3);
  EXPECT_EQ(stem.g.R, 7);
  EXPECT_EQ(stem.g.stride_w, 2);
  EXPECT_EQ(stem.g.pad_h, 3);
  EXPECT_EQ(stem.g.P(), 112);
  const ConvShape pointwise = parse_conv_shape("resnet 1x1 256->64 56x56 n64");
  EXPECT_TRUE(pointwise.g.pointwise());
  EXPECT_EQ(pointwise.g.K, 64);
}

// `--shape depthwise`: the zoo's depthwise layers at batch 64, each also a --shape by its name.
TEST(BenchShapes, DepthwiseListIsTheZoosLayers) {
  const std::vector<ConvShape> shapes = parse_conv_shapes({"depthwise"});
  ASSERT_EQ(shapes.size(), 23u);
  for (const ConvShape& s : shapes) {
    EXPECT_TRUE(s.g.depthwise()) << s.name;
    EXPECT_EQ(s.g.K, s.g.C) << s.name;
    EXPECT_EQ(s.g.N, 64) << s.name;
    EXPECT_EQ(s.g.pad_h, s.g.R / 2) << s.name;
    EXPECT_EQ(parse_conv_shape(s.name).g, s.g) << s.name;
  }
  EXPECT_EQ(shapes[1].name, "dw 3x3s2 c96 112x112 n64");
  EXPECT_EQ(shapes[1].g.stride_h, 2);
  EXPECT_EQ(shapes[1].g.P(), 56);
  EXPECT_EQ(shapes[22].name, "dw 7x7 c768 7x7 n64");
  EXPECT_EQ(shapes[22].g.P(), 7);
  // Mixed with single shapes, in the order given.
  const std::vector<ConvShape> mixed =
      parse_conv_shapes({"resnet 1x1 256->64 56x56 n64", "depthwise", "1,8,9,9,8,3,p1,g8"});
  ASSERT_EQ(mixed.size(), 25u);
  EXPECT_EQ(mixed[0].name, "resnet 1x1 256->64 56x56 n64");
  EXPECT_EQ(mixed[1].name, "dw 3x3 c32 112x112 n64");
  EXPECT_TRUE(mixed[24].g.depthwise());
  EXPECT_TRUE(contains(error_of([] { parse_conv_shape("depthwise 3x3"); }), "'depthwise'"));
}

// scripts/bench/conv_suite.txt (issue 20's suite): every line's shape, the text before '#', is a
// --shape `crema bench conv` accepts, and keeps its text as the row's name (conv_suite.py keys on
// it). test_conv_suite.py checks the suite's own rules (sources, batches, no repeats).
TEST(BenchShapes, ConvSuiteLinesAreShapes) {
  const std::string path = std::string(CREMA_SOURCE_DIR) + "/scripts/bench/conv_suite.txt";
  std::ifstream file(path);
  ASSERT_TRUE(file) << path;
  std::string line;
  int shapes = 0;
  while (std::getline(file, line)) {
    std::string text = line.substr(0, line.find('#'));
    text.erase(text.find_last_not_of(" \t") + 1);
    if (text.empty()) continue;
    ++shapes;
    const ConvShape shape = parse_conv_shape(text);  // throws, naming the shape, if not
    EXPECT_EQ(shape.name, text);
    EXPECT_FALSE(shape.g.depthwise()) << text;
    EXPECT_TRUE(shape.g.N == 8 || shape.g.N == 16) << text;
  }
  EXPECT_GE(shapes, 50);
}

TEST(BenchShapes, DefaultGemmShapes) {
  const std::vector<GemmShape> shapes = default_gemm_shapes();
  ASSERT_GE(shapes.size(), 7u);
  EXPECT_EQ(shapes[0].str(), "8192,8192,8192,NN");
  // resnet 3x3 64->64 at 56x56, n64, as an implicit GEMM: [64, 576] x [576, 64*56*56].
  EXPECT_EQ(shapes[1].str(), "64,200704,576,NN");
}

TEST(BenchShapes, BatchNormShapes) {
  const BatchNormShape4 s = parse_batch_norm_shape("128,256,56,56");
  EXPECT_EQ(s.N, 128);
  EXPECT_EQ(s.C, 256);
  EXPECT_EQ(s.H, 56);
  EXPECT_EQ(s.W, 56);
  EXPECT_EQ(s.str(), "128,256,56,56");
  for (const std::string bad : {"128,256,56", "128,256,56,56,1", "128,0,7,7", "128,x,7,7", ""}) {
    const std::string message = error_of([&] { parse_batch_norm_shape(bad); });
    EXPECT_TRUE(contains(message, "--shape '" + bad + "'")) << message;
    EXPECT_TRUE(contains(message, "N,C,H,W")) << message;
  }
}

TEST(BenchShapes, DefaultBatchNormShapesAreResNet50s) {
  const std::vector<BatchNormShape4> shapes = default_batch_norm_shapes();
  ASSERT_EQ(shapes.size(), 8u);
  EXPECT_EQ(shapes[0].str(), "128,64,56,56");
  EXPECT_EQ(shapes[1].str(), "128,256,56,56");
  EXPECT_EQ(shapes[7].str(), "128,2048,7,7");
}

TEST(BenchOptions, Checked) {
  Options options;
  check_options(options);
  options.math = "fp16";
  EXPECT_TRUE(contains(error_of([&] { check_options(options); }), "--math"));
  options.math = "bf16";
  options.repeats = 0;
  EXPECT_TRUE(contains(error_of([&] { check_options(options); }), "--repeats"));
  options.repeats = 1;
  options.warmup = -1;
  EXPECT_TRUE(contains(error_of([&] { check_options(options); }), "--warmup"));
  options.warmup = 0;
  options.layout = "nhwc";
  check_options(options);
  options.layout = "chwn";
  EXPECT_TRUE(contains(error_of([&] { check_options(options); }), "--layout"));
}

TEST(BenchOptions, CommandNeedsAGpuAndAKnownOp) {
  std::ostringstream out;
  EXPECT_TRUE(
      contains(error_of([&] { bench_command("conv", "cpu", Options{}, out); }), "not a GPU"));
  EXPECT_TRUE(
      contains(error_of([&] { bench_command("conv-tc", "cpu", Options{}, out); }), "not a GPU"));
  Options bad_shape;
  bad_shape.shapes = {"64,64,56"};
  EXPECT_TRUE(contains(error_of([&] { bench_command("conv-tc", "cpu", bad_shape, out); }),
                       "--shape '64,64,56'"));
  EXPECT_TRUE(contains(error_of([&] { bench_command("pool", "cuda:0", Options{}, out); }),
                       "unknown op 'pool' (gemm, conv, conv-tc, rnn, batch-norm, softmax, "
                       "optimizer, layer-norm, global-pool, pooling, lrn, activation, eltwise, "
                       "dropout, concat, op-tensor, reduce-tensor, transform-tensor, scale, cast, "
                       "layout, loss, accuracy, im2col, lcn, api)"));
  Options bad_bn;
  bad_bn.shapes = {"128,256,56"};
  EXPECT_TRUE(contains(error_of([&] { bench_command("batch-norm", "cpu", bad_bn, out); }),
                       "--shape '128,256,56'"));
  EXPECT_TRUE(
      contains(error_of([&] { bench_command("batch-norm", "cpu", Options{}, out); }), "not a GPU"));
  EXPECT_TRUE(contains(error_of([&] { bench_command("gemm", "tpu:0", Options{}, out); }), "tpu"));
}

// Every memory-bound op's name is known: without a GPU each gets as far as the device.
TEST(BenchOptions, MemoryBoundOpsAreKnown) {
  std::ostringstream out;
  for (const std::string& op : bench_ops()) {
    const std::string error = error_of([&] { bench_command(op, "cpu", Options{}, out); });
    EXPECT_TRUE(contains(error, "not a GPU")) << op << ": " << error;
  }
  // The ops added for issue 17 check their N,C,H,W shapes before the device too.
  for (const char* op : {"op-tensor", "reduce-tensor", "transform-tensor", "scale", "cast",
                         "layout", "loss", "accuracy", "im2col", "lcn"}) {
    Options bad;
    bad.shapes = {"8,21,512"};
    const std::string error = error_of([&] { bench_command(op, "cpu", bad, out); });
    EXPECT_TRUE(contains(error, "--shape '8,21,512'")) << op << ": " << error;
  }
  // Their shapes are checked first: N,C,H,W, softmax's N,C.
  Options nchw;
  nchw.shapes = {"64,64,112"};
  EXPECT_TRUE(contains(error_of([&] { bench_command("pooling", "cpu", nchw, out); }),
                       "--shape '64,64,112'"));
  nchw.shapes = {"4096,1000"};
  EXPECT_TRUE(contains(error_of([&] { bench_command("activation", "cpu", nchw, out); }),
                       "--shape '4096,1000'"));
  EXPECT_TRUE(contains(error_of([&] { bench_command("softmax", "cpu", nchw, out); }), "not a GPU"));
  for (const char* bad : {"4096,1000,1", "4096", "4096,0", "4096,x", "4096,1000,", ",1000", ""}) {
    Options rows;
    rows.shapes = {bad};
    const std::string error = error_of([&] { bench_command("softmax", "cpu", rows, out); });
    EXPECT_TRUE(contains(error, "--shape '" + std::string(bad) + "' is not N,C")) << bad;
  }
  EXPECT_EQ(parse_softmax_shape("256,32000"), (std::vector<int64_t>{256, 32000}));
}

TEST(BenchTable, Arithmetic) {
  const double ref[] = {3.0, 4.0};
  const float same[] = {3.0f, 4.0f}, off[] = {3.0f, 4.5f};
  EXPECT_EQ(relative_error(same, ref, 2), 0.0);
  EXPECT_NEAR(relative_error(off, ref, 2), 0.1, 1e-12);  // 0.5 / 5
  EXPECT_EQ(rotation_copies(0), 1);
  EXPECT_EQ(rotation_copies(size_t(1) << 30), 1);
  EXPECT_EQ(rotation_copies(size_t(100e6)), 2);
  EXPECT_EQ(rotation_copies(size_t(1e6)), 200);
  EXPECT_EQ(rotation_copies(16), 256);  // capped
}

// Calls under 0.2 ms are timed in bursts spanning about 0.2 ms; the count is capped.
TEST(BenchTiming, BurstSpansAboutAFifthOfAMillisecond) {
  EXPECT_EQ(burst_for(5.0), 1);
  EXPECT_EQ(burst_for(0.2), 1);
  EXPECT_EQ(burst_for(0.15), 2);
  EXPECT_EQ(burst_for(0.05), 4);
  EXPECT_EQ(burst_for(0.009), 23);
  EXPECT_EQ(burst_for(0.0), 200);  // capped (a call too short to time)
}

TEST(BenchTable, PrintsRowsAndFailsOnABadCheck) {
  DevicePeak peak;
  peak.name = "test GPU";
  peak.fp32_tflops = 50;
  std::ostringstream out;
  Table table(out, peak);
  Row row;
  row.shape = "resnet 3x3 64->64 56x56 n64";
  row.pass = "fwd";
  row.version = "implicit_gemm";
  row.check = "cpu";
  row.rel_error = 2e-7;
  row.tolerance = 1e-4;
  row.ms = 2.0;
  row.flops = 50e9;  // 25 TFLOP/s: half the peak
  row.peak = "fp32";
  row.workspace_bytes = 3e6;
  table.print(row);
  EXPECT_EQ(table.status(), 0);
  const std::string text = out.str();
  EXPECT_TRUE(contains(text, "device: test GPU")) << text;
  EXPECT_TRUE(contains(text, "25.00")) << text;
  EXPECT_TRUE(contains(text, " 50.0 ")) << text;
  EXPECT_TRUE(contains(text, " 3.0 ok")) << text;

  row.rel_error = NAN;  // an element never written
  table.print(row);
  EXPECT_EQ(table.status(), 1);
  EXPECT_TRUE(contains(out.str(), "FAIL")) << out.str();
}

}  // namespace
}  // namespace crema::bench
