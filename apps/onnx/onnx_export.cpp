#include "apps/onnx/onnx_export.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/graph_export.h"

namespace crema {
namespace {

// GraphBuilder over an onnx::GraphProto. Names are unique in the graph: temporaries and
// constants get a counter suffix when their hint is taken.
class OnnxGraph final : public GraphBuilder {
 public:
  explicit OnnxGraph(onnx::GraphProto& graph) : graph_(graph) {}

  void node(const std::string& op, const std::vector<std::string>& inputs,
            const std::vector<std::string>& outputs,
            const std::vector<GraphAttribute>& attributes) override {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(outputs.empty() ? op : outputs[0] + "/" + op);
    for (const std::string& in : inputs) n.add_input(in);
    for (const std::string& out : outputs) {
      n.add_output(out);
      taken_.insert(out);
    }
    for (const GraphAttribute& a : attributes) add_attribute(n, a);
  }

  std::string weight(const std::string& name, const Tensor& value, const Shape& shape) override {
    const Shape& dims = shape.empty() ? value.shape() : shape;
    if (shape_numel(dims) != value.numel()) {
      throw Error("ONNX export: '" + name + "' has " + std::to_string(value.numel()) +
                  " elements, cannot be stored as " + shape_str(dims));
    }
    const std::string unique = fresh(name);
    const std::vector<float> data = value.to_vector();
    add_floats(unique, data, dims);
    return unique;
  }

  std::string ints(const std::string& hint, const std::vector<int64_t>& values) override {
    const std::string name = fresh(hint);
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(int64_t(values.size()));
    for (int64_t v : values) t.add_int64_data(v);
    return name;
  }

  std::string floats(const std::string& hint, const std::vector<float>& values,
                     const Shape& shape) override {
    const std::string name = fresh(hint);
    add_floats(name, values, shape);
    return name;
  }

  std::string temp(const std::string& hint) override { return fresh(hint); }

  // `name` if free, else name_1, name_2, ...
  std::string fresh(const std::string& hint) {
    std::string name = hint;
    for (int k = 1; taken_.count(name) != 0; ++k) name = hint + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

 private:
  void add_floats(const std::string& name, const std::vector<float>& values, const Shape& shape) {
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t.add_dims(d);
    // raw_data is little-endian, as is every machine crema builds for.
    t.set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  }

  static void add_attribute(onnx::NodeProto& n, const GraphAttribute& a) {
    onnx::AttributeProto& p = *n.add_attribute();
    p.set_name(a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      p.set_type(onnx::AttributeProto::INT);
      p.set_i(*i);
    } else if (const auto* f = std::get_if<float>(&a.value)) {
      p.set_type(onnx::AttributeProto::FLOAT);
      p.set_f(*f);
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a.value)) {
      p.set_type(onnx::AttributeProto::INTS);
      for (int64_t v : *is) p.add_ints(v);
    } else if (const auto* fs = std::get_if<std::vector<float>>(&a.value)) {
      p.set_type(onnx::AttributeProto::FLOATS);
      for (float v : *fs) p.add_floats(v);
    } else {
      p.set_type(onnx::AttributeProto::STRING);
      p.set_s(std::get<std::string>(a.value));
    }
  }

  onnx::GraphProto& graph_;
  std::set<std::string> taken_;
};

// A float tensor's type with the net's shape, dimension 0 symbolic ("batch").
void set_value_info(onnx::ValueInfoProto& info, const std::string& name, const Shape& shape) {
  info.set_name(name);
  onnx::TypeProto_Tensor& t = *info.mutable_type()->mutable_tensor_type();
  t.set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto& s = *t.mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i == 0) {
      s.add_dim()->set_dim_param("batch");
    } else {
      s.add_dim()->set_dim_value(shape[i]);
    }
  }
}

}  // namespace

void export_onnx(Net& net, const std::string& graph_name, const std::string& path,
                 std::ostream& log) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("crema");
  model.set_model_version(1);
  model.add_opset_import()->set_version(kOnnxOpset);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(graph_name);
  OnnxGraph g(graph);

  // Name every value: the graph's name for each blob's current value. An in-place layer writes
  // a new value, so its top gets a fresh name (conv1, then conv1_1 after an in-place ReLU). The
  // Split layers the Net inserted are no nodes: their tops are names for their bottom's value.
  struct Step {
    size_t layer;
    LayerIO io;
  };
  std::vector<Step> steps;
  std::set<std::string> outputs;  // what losses and metrics read, and tops no layer reads
  std::set<std::string> read;
  std::map<const Blob*, std::string> current;
  for (const auto& [name, per_sample] : net.inputs()) current[&net.blob(name)] = g.fresh(name);
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const Layer& layer = net.layer(i);
    LayerIO io;
    for (const Blob* b : net.layer_bottoms(i)) {
      io.bottoms.push_back({current.at(b), b->value.shape()});
      read.insert(current.at(b));
    }
    if (layer.type() == "Split") {
      for (const Blob* t : net.layer_tops(i)) current[t] = io.bottom(0);
      continue;
    }
    if (!layer.in_inference_graph()) {
      for (const GraphValue& v : io.bottoms) outputs.insert(v.name);
      continue;
    }
    for (const Blob* t : net.layer_tops(i)) {
      io.tops.push_back({g.fresh(t->name), t->value.shape()});
      current[t] = io.tops.back().name;
    }
    steps.push_back({i, std::move(io)});
  }
  for (const Step& step : steps) {
    for (const GraphValue& t : step.io.tops) {
      if (read.count(t.name) == 0) outputs.insert(t.name);
    }
  }
  // Keep the layers the outputs depend on (backward from the outputs), and the inputs they read.
  std::set<std::string> needed = outputs, read_by_live;
  std::vector<bool> live(steps.size(), false);
  for (size_t k = steps.size(); k-- > 0;) {
    for (const GraphValue& t : steps[k].io.tops) live[k] = live[k] || needed.count(t.name) != 0;
    if (!live[k]) continue;
    for (const GraphValue& b : steps[k].io.bottoms) {
      needed.insert(b.name);
      read_by_live.insert(b.name);
    }
  }
  for (const auto& [name, per_sample] : net.inputs()) {
    const Blob& b = net.blob(name);
    if (read_by_live.count(name) != 0) set_value_info(*graph.add_input(), name, b.value.shape());
  }
  int output_count = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (!live[k]) continue;
    net.layer(steps[k].layer).export_graph(steps[k].io, g);
    for (const GraphValue& t : steps[k].io.tops) {
      if (outputs.count(t.name) == 0) continue;
      set_value_info(*graph.add_output(), t.name, t.shape);
      ++output_count;
    }
  }
  if (output_count == 0) throw Error("ONNX export: the net has no output outside its losses");

  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error("ONNX export produced a model ONNX's checker refuses: " + std::string(e.what()));
  }
  const std::string partial = path + ".partial";
  {
    std::ofstream file(partial, std::ios::binary | std::ios::trunc);
    if (!file || !model.SerializeToOstream(&file) || !file.flush()) {
      std::error_code ignored;
      std::filesystem::remove(partial, ignored);
      throw Error("cannot write " + path + ": " + std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) throw Error("cannot write " + path + ": " + ec.message());
  log << "wrote " << path << ": " << graph.node_size() << " ONNX nodes (opset " << kOnnxOpset
      << "), " << graph.initializer_size() << " initializers, " << graph.input_size()
      << " input(s), " << output_count << " output(s)\n";
}

}  // namespace crema
