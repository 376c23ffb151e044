// crema bench conv on a GPU: after its table, a blank line, then one "auto: PASS VERSION SHAPE"
// line per shape and pass naming get_conv_algorithm's choice (scripts/bench/conv_suite.py reads
// them), each a version the table holds a passing row of; the table's rows stay as they were.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "apps/bench.h"
#include "kernels/convolution/select.h"
#include "tests/support/cuda_test_util.h"

namespace crema::bench {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(BenchConvCuda, AutoLinesFollowTheTable) {
  CREMA_REQUIRE_CUDA();
  // A 3x3, a pointwise and a rectangular strided filter (odd extents throughout).
  const std::vector<std::string> shapes = {"2,3,9,7,4,3,p1", "2,4,6,6,8,1",
                                           "1,2,11,13,4,5x3,s2x1,p2x1"};
  Options options;
  options.shapes = shapes;
  options.warmup = 0;
  options.repeats = 1;
  std::ostringstream out;
  ASSERT_EQ(bench_command("conv", "cuda:0", options, out), 0) << out.str();
  const std::vector<std::string> lines = lines_of(out.str());
  size_t blank = 0;
  while (blank < lines.size() && !lines[blank].empty()) ++blank;
  ASSERT_EQ(lines.size(), blank + 1 + 3 * shapes.size()) << out.str();
  const kernels::ConvPass passes[] = {kernels::ConvPass::forward, kernels::ConvPass::backward_data,
                                      kernels::ConvPass::backward_filter};
  const char* names[] = {"fwd", "dgrad", "wgrad"};
  size_t at = blank + 1;
  for (const std::string& shape : shapes) {
    const kernels::Conv2dGeometry g = parse_conv_shape(shape).g;
    for (int p = 0; p < 3; ++p, ++at) {
      const std::string version = kernels::get_conv_algorithm(passes[p], g).name;
      EXPECT_EQ(lines[at], std::string("auto: ") + names[p] + " " + version + " " + shape);
      // The table's passing row of that version: "SHAPE PASS VERSION ... ok".
      bool found = false;
      for (size_t i = 0; i < blank; ++i) {
        std::istringstream row(lines[i]);
        std::string s, pass, v;
        row >> s >> pass >> v;
        const std::string& line = lines[i];
        found |= s == shape && pass == names[p] && v == version && line.size() > 3 &&
                 line.compare(line.size() - 3, 3, " ok") == 0;
      }
      EXPECT_TRUE(found) << shape << " " << names[p] << " " << version << "\n" << out.str();
    }
  }
}

}  // namespace
}  // namespace crema::bench
