// crema export CONFIG --weights W --onnx OUT.onnx: the config's model in inference mode (the test
// phase), with the weights W, as an ONNX file (apps/onnx/onnx_export.h).
#include <ostream>

#include "apps/commands.h"
#include "apps/onnx/onnx_export.h"
#include "apps/session.h"
#include "apps/training/evaluation.h"
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
  const std::string notes = load_all_weights(net, options.weights);
  if (!notes.empty()) out << "weights from " << options.weights << ": " << notes << "\n";
  export_onnx(net, s.name, onnx_path, out);
}

}  // namespace crema
