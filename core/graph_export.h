// GraphBuilder: how a layer describes itself as nodes of an inference graph (ONNX's operator set),
// without knowing the file format. `crema export --onnx` (apps/onnx/) implements it with ONNX's
// protobuf schema; a layer implements Layer::export_graph by calling it:
//
//   void export_graph(const LayerIO& io, GraphBuilder& g) const override {
//     g.node("Relu", {io.bottom(0)}, {io.top(0)});
//   }
//
// Values are named. A bottom or top name here is the graph's name for that value at that point
// (in-place layers write a new value, so the names are not the blob names); `g.temp` makes names
// for a layer's intermediate values, `g.weight` and `g.ints`/`g.floats` add constants.
// Shapes are the net's (batch first); the exported graph keeps the batch dimension symbolic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace crema {

// One operator attribute: an integer, a float, a list of either, or a string.
struct GraphAttribute {
  using Value = std::variant<int64_t, float, std::vector<int64_t>, std::vector<float>, std::string>;
  GraphAttribute(std::string n, int64_t v) : name(std::move(n)), value(v) {}
  GraphAttribute(std::string n, int v) : name(std::move(n)), value(int64_t(v)) {}
  GraphAttribute(std::string n, float v) : name(std::move(n)), value(v) {}
  GraphAttribute(std::string n, double v) : name(std::move(n)), value(float(v)) {}
  GraphAttribute(std::string n, std::vector<int64_t> v) : name(std::move(n)), value(std::move(v)) {}
  GraphAttribute(std::string n, std::vector<float> v) : name(std::move(n)), value(std::move(v)) {}
  GraphAttribute(std::string n, std::string v) : name(std::move(n)), value(std::move(v)) {}
  GraphAttribute(std::string n, const char* v) : name(std::move(n)), value(std::string(v)) {}
  std::string name;
  Value value;
};

// A value of the graph as a layer sees it: its name and the net's shape for it.
struct GraphValue {
  std::string name;
  Shape shape;
};

// The layer's bottoms and tops as graph values.
struct LayerIO {
  std::vector<GraphValue> bottoms;
  std::vector<GraphValue> tops;
  const std::string& bottom(size_t i) const { return bottoms.at(i).name; }
  const std::string& top(size_t i) const { return tops.at(i).name; }
};

class GraphBuilder {
 public:
  virtual ~GraphBuilder() = default;
  // Adds the node `op(inputs) -> outputs` of the default (ai.onnx) domain. An empty input name
  // is an omitted optional input.
  virtual void node(const std::string& op, const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs,
                    const std::vector<GraphAttribute>& attributes = {}) = 0;
  // Adds a parameter or buffer as a constant of the graph under its own name ("conv1.weight"),
  // copied to the host; with `shape`, stored with that shape instead (same element count), e.g.
  // a per-channel vector as [C, 1, 1] to broadcast over H and W. Returns the name.
  virtual std::string weight(const std::string& name, const Tensor& value,
                             const Shape& shape = {}) = 0;
  // Adds a 1-D int64 or a float constant of the given shape ([] for a scalar) under a fresh
  // name made from `hint`, and returns that name.
  virtual std::string ints(const std::string& hint, const std::vector<int64_t>& values) = 0;
  virtual std::string floats(const std::string& hint, const std::vector<float>& values,
                             const Shape& shape) = 0;
  // A fresh name for an intermediate value, made from `hint`.
  virtual std::string temp(const std::string& hint) = 0;
};

}  // namespace crema
