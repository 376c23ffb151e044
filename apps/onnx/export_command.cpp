// crema export CONFIG --weights W --onnx OUT.onnx: the config's model in inference mode (the test
// phase), with the weights W, as an ONNX file (apps/onnx/onnx_export.h).
#include <ostream>

#include "apps/commands.h"
#include "apps/onnx/onnx_export.h"
#include "apps/session.h"
#include "apps/training/checkpoint.h"
#include "core/error.h"
#include "core/net.h"

namespace crema {

void export_command(const CommandOptions& options, const std::string& onnx_path,
                    std::ostream& out) {
  if (onnx_path.empty()) throw Error("crema export needs --onnx OUT.onnx");
  if (options.weights.empty()) throw Error("crema export needs --weights FILE");
  CommandOptions on_cpu = options;
  on_cpu.device = "cpu";  // the graph is written from host copies of the weights
  Session s(on_cpu);
  Net net(s.root.at("model"), Phase::test, 1, s.registry, *s.ctx);
  const WeightsReport report = copy_weights_by_name(net, options.weights);
  if (!report.missing.empty()) {
    std::string names;
    for (const std::string& n : report.missing) names += (names.empty() ? "" : ", ") + n;
    throw Error(options.weights + " lacks " + names + ", which the model needs");
  }
  export_onnx(net, s.name, onnx_path, out);
}

}  // namespace crema
