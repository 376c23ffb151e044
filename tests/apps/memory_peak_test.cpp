// `crema summary`'s planned peak against the peak `crema time` measures (the allocator's
// high-water mark, here the CPU's host heap, counted from the start of the process): within 10%;
// and what the plan saves, measured.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

std::string run(const std::string& args, const std::string& dir) {
  const std::string out = dir + "/out.txt";
  const std::string command = std::string(CREMA_BINARY_DIR) + "/bin/crema " + args + " > " + out;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number of MiB after `label` on the line that has it ("planned peak: 0.01 GiB (12.3 MiB)"
// gives 12.3; "memory: 12.5 MiB at the peak" with label "memory:" gives 12.5).
double mib_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no '" << label << "' in:\n" << text;
    return 0;
  }
  const std::string line = text.substr(at, text.find('\n', at) - at);
  const size_t mib = line.find(" MiB");
  const size_t start = line.find_last_of(" (", mib - 1) + 1;
  return std::atof(line.substr(start, mib - start).c_str());
}

TEST(MemoryPeak, SummaryPlanAgreesWithTheMeasuredPeak) {
  const std::string dir = testing::fresh_dir("memory_peak");
  testing::write_synthetic_idx(dir, 64, 5);
  // Mostly activations (batch 1024), no convolution (its shared workspace is not planned).
  testing::write_text(dir + "/net.yaml", R"(name: mlp
data:
  train:
    source: {format: idx, images: images.gz, labels: labels.gz}
    batch_size: 1024
model:
  inputs: {data: [1, 8, 8], label: []}
  layers:
    - {name: ip1, type: InnerProduct, bottom: data, top: ip1, num_output: 256}
    - {name: bn1, type: BatchNorm, bottom: ip1, top: ip1}
    - {name: relu1, type: ReLU, bottom: ip1, top: ip1}
    - {name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 256}
    - {name: bn2, type: BatchNorm, bottom: ip2, top: bn2}
    - {name: add, type: Eltwise, bottom: [bn2, ip1], top: add}
    - {name: relu2, type: ReLU, bottom: add, top: add}
    - {name: ip3, type: InnerProduct, bottom: add, top: ip3, num_output: 10}
    - {name: loss, type: SoftmaxWithLoss, bottom: [ip3, label], top: loss}
solver: {type: sgd, base_lr: 0.1, momentum: 0.9, max_iter: 10}
)");
  const std::string config = dir + "/net.yaml";
  const std::string cpu = " --device cpu --iterations 1 --threads 1";
  const std::string summary = run("summary " + config, dir);
  const std::string timed = run("time " + config + cpu, dir);
  const double planned = mib_after(summary, "planned peak:");
  const double measured = mib_after(timed, "memory:");
  EXPECT_NEAR(measured, planned, 0.1 * planned) << summary << timed;
  EXPECT_LT(planned, mib_after(summary, "kept whole:"));

  // Without the plan every tensor stays: 12.4 MiB measured against 7.3 MiB here, both unfused
  // (fused, core/net_fusion.h, the layers differ: 11.4 against 8.3 MiB).
  const std::string unfused = " --set +model.fuse=false", off = " --set +model.memory_plan=false";
  EXPECT_NE(run("summary " + config + off, dir).find("planned peak: no plan"), std::string::npos);
  const double plan = mib_after(run("time " + config + unfused + cpu, dir), "memory:");
  const double whole = mib_after(run("time " + config + unfused + off + cpu, dir), "memory:");
  EXPECT_GT(whole, 1.5 * plan) << whole << " MiB without the plan, " << plan << " with it";
}

}  // namespace
}  // namespace crema
