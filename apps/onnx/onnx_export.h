// crema export --onnx: a net, in inference mode, as an ONNX model (opset 17) that onnxruntime and
// other ONNX runtimes run. Each layer writes its own nodes (Layer::export_graph, through
// core/graph_export.h); this file walks the net and writes the protobuf with ONNX's own schema
// (Debian's libonnx-dev), then checks the model with ONNX's checker.
#pragma once

#include <iosfwd>
#include <string>

#include "core/net.h"

namespace crema {

// The ONNX operator set the export targets (ONNX 1.12; onnxruntime >= 1.13).
constexpr int kOnnxOpset = 17;

// Writes `net` (built for Phase::test) to `path`: its inputs with a symbolic batch dimension
// ("batch"), its parameters and buffers as initializers under their names, one or more nodes per
// layer, and as outputs every value no exported layer consumes. Losses and metrics are left out
// (Layer::in_inference_graph), and with them the inputs only they read (labels). Throws
// crema::Error naming the layer that has no ONNX form, or the file that cannot be written.
void export_onnx(Net& net, const std::string& graph_name, const std::string& path,
                 std::ostream& log);

}  // namespace crema
