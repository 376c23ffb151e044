// crema bench's memory-bound ops on a GPU: each family on small awkward shapes (odd extents,
// vector tails, C that does and does not fill 16 bytes), f32 and bf16, nchw and nhwc where the op
// takes them, every version; every row must pass its check against ref<double> (the command's
// exit status 0) and the table must hold the rows the family promises.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "core/error.h"
#include "tests/support/cuda_test_util.h"

namespace crema::bench {
namespace {

// The rows of a table that passed (lines ending in " ok"); the output goes to the log on failure.
int passed_rows(const std::string& table) {
  std::istringstream in(table);
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.size() >= 3 && line.compare(line.size() - 3, 3, " ok") == 0) ++rows;
  }
  return rows;
}

void expect_all_pass(const std::string& op, const std::vector<std::string>& shapes,
                     const std::string& math, const std::string& layout, int rows) {
  Options options;
  options.shapes = shapes;
  options.math = math;
  options.layout = layout;
  options.warmup = 0;
  options.repeats = 1;
  std::ostringstream out;
  const int status = bench_command(op, "cuda:0", options, out);
  EXPECT_EQ(status, 0) << op << " " << math << " " << layout << "\n" << out.str();
  EXPECT_EQ(passed_rows(out.str()), rows) << op << " " << math << " " << layout << "\n"
                                          << out.str();
}

TEST(BenchMemoryOpsCuda, PoolingPassesInBothLayoutsAndDtypes) {
  CREMA_REQUIRE_CUDA();
  // C = 5: per_element only; C = 16 in nhwc: channel_vectors too (64 or 32 bytes a pixel).
  // Rows per shape and version: 2 windows x max/avg x fwd/bwd.
  const std::vector<std::string> shapes = {"3,5,13,11", "2,16,9,10"};
  for (const char* math : {"fp32", "bf16"}) {
    expect_all_pass("pooling", shapes, math, "nchw", 2 * 8);
    expect_all_pass("pooling", shapes, math, "nhwc", 3 * 8);
  }
}

TEST(BenchMemoryOpsCuda, ApiPasses) {
  CREMA_REQUIRE_CUDA();
  // kernel, api-packed, api-blend, api-nhwc-in, transform.
  expect_all_pass("api", {"2,5,7,9", "1,3,1,1"}, "fp32", "nchw", 2 * 5);
}

TEST(BenchMemoryOpsCuda, SoftmaxAndLrnPass) {
  CREMA_REQUIRE_CUDA();
  // Two versions each, fwd and bwd.
  expect_all_pass("softmax", {"7,1000", "3,33", "5,5"}, "fp32", "nchw", 3 * 4);
  expect_all_pass("lrn", {"2,7,5,6", "1,3,1,1"}, "fp32", "nchw", 2 * 4);
}

TEST(BenchMemoryOpsCuda, PointwiseOpsPassInBothDtypes) {
  CREMA_REQUIRE_CUDA();
  // 945 and 5 elements: vector tails; 2*3*5*7 parts for concat.
  const std::vector<std::string> shapes = {"3,5,7,9", "1,1,1,5"};
  for (const char* math : {"fp32", "bf16"}) {
    expect_all_pass("activation", shapes, math, "nchw", 2 * 12);  // 6 activations x fwd/bwd
    expect_all_pass("eltwise", shapes, math, "nchw", 2 * 2);
    expect_all_pass("dropout", shapes, math, "nchw", 2 * 2);
    expect_all_pass("concat", {"2,3,5,7", "1,1,1,3"}, math, "nchw", 2 * 2);
  }
}

TEST(BenchMemoryOpsCuda, VersionPicksOneAndNamesTheList) {
  CREMA_REQUIRE_CUDA();
  Options options;
  options.shapes = {"2,16,9,10"};
  options.layout = "nhwc";
  options.version = "channel_vectors";
  options.warmup = 0;
  options.repeats = 1;
  std::ostringstream out;
  EXPECT_EQ(bench_command("pooling", "cuda:0", options, out), 0) << out.str();
  EXPECT_EQ(passed_rows(out.str()), 8) << out.str();
  EXPECT_EQ(out.str().find("per_element"), std::string::npos) << out.str();
  options.version = "warp";
  try {
    bench_command("pooling", "cuda:0", options, out);
    ADD_FAILURE() << "pooling took --version warp";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(per_element, channel_vectors)"), std::string::npos)
        << e.what();
  }
}

TEST(BenchMemoryOpsCuda, F32OnlyOpsRefuseBf16) {
  CREMA_REQUIRE_CUDA();
  Options options;
  options.math = "bf16";
  std::ostringstream out;
  for (const char* op : {"softmax", "lrn"}) {
    try {
      bench_command(op, "cuda:0", options, out);
      ADD_FAILURE() << op << " took --math bf16";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("f32"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace crema::bench
