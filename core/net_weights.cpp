// The weights of a Net between nets and files: sharing with another net (test nets read the
// training net's parameters), and files under the parameters' PyTorch names (safetensors written,
// safetensors or .pth read).
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/net.h"
#include "core/serialization.h"
#include "core/shape.h"
#include "core/weights_file.h"

namespace crema {

void Net::share_params_from(Net& other) {
  std::map<std::string, Param*> theirs;
  for (Param* p : other.learnable_) theirs[p->name] = p;
  // A parameter shared by name (`param: {weight: {name: w}}`) is learnable under its first
  // owner's name only: every layer holding it takes the other net's tensor of that name.
  std::map<const Param*, std::string> stored_as;
  for (auto& layer : layers_) {
    for (Param& p : layer->params()) {
      stored_as[&p] = p.name;
      for (const Param* owner : learnable_) {
        if (owner->value.shares_storage(p.value)) stored_as[&p] = owner->name;
      }
    }
  }
  for (auto& layer : layers_) {
    for (Param& p : layer->params()) {
      auto it = theirs.find(stored_as[&p]);
      if (it == theirs.end()) continue;
      if (it->second->value.shape() != p.value.shape()) {
        throw Error("parameter '" + p.name + "' is " + shape_str(p.value.shape()) + " in the " +
                    phase_name(phase_) + " net but " + shape_str(it->second->value.shape()) +
                    " in the " + phase_name(other.phase_) + " net");
      }
      p.value = it->second->value;
      p.grad = it->second->grad;
    }
  }
  std::map<std::string, Buffer*> their_buffers;
  for (Buffer* b : other.buffers_) their_buffers[b->name] = b;
  for (Buffer* b : buffers_) {
    auto it = their_buffers.find(b->name);
    if (it != their_buffers.end() && it->second->value.shape() == b->value.shape()) {
      b->value = it->second->value;
    }
  }
}

void Net::save_weights(const std::string& path) const {
  std::vector<std::pair<std::string, Tensor>> named;
  for (const Param* p : learnable_) {
    Tensor host(p->value.shape(), p->value.dtype());
    host.copy_from(p->value);
    named.emplace_back(p->name, std::move(host));
  }
  for (const Buffer* b : buffers_) {
    Tensor host(b->value.shape(), b->value.dtype());
    host.copy_from(b->value);
    named.emplace_back(b->name, std::move(host));
  }
  save_safetensors(path, named);
}

void Net::load_weights(const std::string& path, bool strict) {
  const auto loaded = read_weights_file(path).tensors;
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : loaded) by_name[name] = &tensor;
  auto load_one = [&](const std::string& name, Tensor& value) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      if (strict) {
        throw Error(path + ": no tensor '" + name + "' for the net's tensor of that name");
      }
      return;
    }
    const Tensor& t = *it->second;
    if (t.shape() != value.shape()) {
      const std::string layer = name.substr(0, name.rfind('.'));
      throw Error(path + ": tensor '" + name + "' is " + shape_str(t.shape()) + " but layer '" +
                  layer + "' expects " + shape_str(value.shape()) +
                  " (rename the layer to train it from scratch instead of loading it)");
    }
    value.copy_from(t);
  };
  for (Param* p : learnable_) load_one(p->name, p->value);
  for (Buffer* b : buffers_) load_one(b->name, b->value);
}

}  // namespace crema
