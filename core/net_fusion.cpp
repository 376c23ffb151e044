#include "core/net_fusion.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>

namespace crema {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A layer of this type, outside any loss.
bool is_plain(const LayerSpec& spec, const char* type) {
  return spec.type == type && !spec.node->has("loss_weight");
}

// The layers after `producer` that read the version of `blob` it wrote: up to the first one that
// writes `blob` again (included when it also reads it: an in-place layer).
std::vector<size_t> readers(const std::vector<LayerSpec>& specs, const std::vector<bool>& removed,
                            size_t producer, const std::string& blob) {
  std::vector<size_t> out;
  for (size_t j = producer + 1; j < specs.size(); ++j) {
    if (removed[j]) continue;
    if (contains(specs[j].bottoms, blob)) out.push_back(j);
    if (contains(specs[j].tops, blob)) break;
  }
  return out;
}

// The only reader of what layer i writes as its one top, if there is exactly one.
std::optional<size_t> only_reader(const std::vector<LayerSpec>& specs,
                                  const std::vector<bool>& removed, size_t i) {
  if (specs[i].tops.size() != 1) return std::nullopt;
  const std::vector<size_t> r = readers(specs, removed, i, specs[i].tops[0]);
  if (r.size() != 1) return std::nullopt;
  return r[0];
}

// A plain ReLU in place on `blob`.
bool is_relu_in_place(const LayerSpec& spec, const std::string& blob) {
  return is_plain(spec, "ReLU") && spec.bottoms == std::vector<std::string>{blob} &&
         spec.tops == spec.bottoms && spec.node->get<float>("negative_slope", 0.0f) == 0.0f;
}

// An Eltwise y = t + r: SUM of two bottoms, t one of them, both coefficients 1, not in place.
bool is_residual_sum(const LayerSpec& spec, const std::string& t) {
  if (!is_plain(spec, "Eltwise") || spec.bottoms.size() != 2 || spec.tops.size() != 1) return false;
  if (spec.bottoms[0] == spec.bottoms[1] || !contains(spec.bottoms, t)) return false;
  if (contains(spec.bottoms, spec.tops[0])) return false;
  const ConfigNode& node = *spec.node;
  if (node.get<std::string>("operation", "SUM") != "SUM") return false;
  if (!node.get<bool>("stable_prod_grad", true)) return false;
  if (node.has("coeff") && node.get_list<float>("coeff") != std::vector<float>{1.0f, 1.0f}) {
    return false;
  }
  return true;
}

// `name` without the dotted prefix it shares with `first`: "layer1.0.add" after "layer1.0.bn3"
// is "add".
std::string short_name(const std::string& first, const std::string& name) {
  size_t cut = 0;
  for (size_t i = 0; i < name.size() && i < first.size() && name[i] == first[i]; ++i) {
    if (name[i] == '.') cut = i + 1;
  }
  return name.substr(cut);
}

// A BatchNorm (+ ReLU) in place on x would keep a copy of x for its backward (y overwrites it).
// When x is written by a layer out of place and only the BatchNorm reads it, that layer writes it
// as "<x>/bn_input" instead and `fused` (the fused layer, or the BatchNorm itself) reads it there:
// no copy, no second buffer, and x still names what it named (in place, the output).
void write_input_apart(std::vector<LayerSpec>& specs, const std::vector<bool>& removed, size_t i,
                       std::set<std::string>& blobs, LayerSpec& fused) {
  const std::string& x = specs[i].bottoms[0];
  const std::string apart = x + "/bn_input";
  if (blobs.count(apart) != 0) return;
  for (size_t p = i; p-- > 0;) {
    if (removed[p] || !contains(specs[p].tops, x)) continue;
    if (contains(specs[p].bottoms, x) || readers(specs, removed, p, x) != std::vector<size_t>{i}) {
      return;
    }
    *std::find(specs[p].tops.begin(), specs[p].tops.end(), x) = apart;
    fused.bottoms[0] = apart;
    blobs.insert(apart);
    return;
  }
}

}  // namespace

void fuse_layers(const ConfigNode& model, std::vector<LayerSpec>& specs) {
  if (!model.get<bool>("fuse", true)) return;
  std::set<std::string> names, blobs;  // layer names, blob names
  for (const LayerSpec& spec : specs) {
    names.insert(spec.name);
    blobs.insert(spec.tops.begin(), spec.tops.end());
    blobs.insert(spec.bottoms.begin(), spec.bottoms.end());
  }
  std::vector<bool> removed(specs.size(), false);
  for (size_t i = 0; i < specs.size(); ++i) {
    const LayerSpec& bn = specs[i];
    if (removed[i] || !is_plain(bn, "BatchNorm") || bn.bottoms.size() != 1) continue;
    if (bn.node->get<std::string>("mode", "spatial") != "spatial") continue;
    if (bn.batch_norm_syncs()) continue;  // SyncBatchNorm: no fused form
    const std::optional<size_t> next = only_reader(specs, removed, i);
    if (!next) continue;
    const std::string& t = bn.tops[0];
    LayerSpec fused = bn;
    fused.type = "BatchNormReLU";
    size_t at = i;                 // where the fused layer goes
    std::vector<size_t> absorbed;  // the layers it replaces besides the BatchNorm
    if (is_relu_in_place(specs[*next], t)) {
      absorbed = {*next};
      if (t == bn.bottoms[0]) write_input_apart(specs, removed, i, blobs, fused);
    } else if (is_residual_sum(specs[*next], t)) {
      const LayerSpec& sum = specs[*next];
      const std::optional<size_t> relu = only_reader(specs, removed, *next);
      if (!relu || !is_relu_in_place(specs[*relu], sum.tops[0])) continue;
      fused.bottoms.push_back(sum.bottoms[sum.bottoms[0] == t ? 1 : 0]);
      fused.tops = sum.tops;
      at = *next;
      absorbed = {*next, *relu};
    } else {
      continue;
    }
    for (size_t j : absorbed) fused.name += "+" + short_name(bn.name, specs[j].name);
    if (names.count(fused.name) != 0) continue;
    for (size_t j : absorbed) {
      specs[j].node->check_no_unknown_keys("layer '" + specs[j].name + "'");
      removed[j] = true;
    }
    removed[i] = true;
    removed[at] = false;
    names.insert(fused.name);
    specs[at] = std::move(fused);
  }
  // A BatchNorm left alone and in place (ResNet's downsampling shortcut, whose sum the block's
  // other BatchNorm absorbed) has its input written apart too: no copy of x to write and keep.
  for (size_t i = 0; i < specs.size(); ++i) {
    LayerSpec& bn = specs[i];
    if (removed[i] || !is_plain(bn, "BatchNorm") || bn.bottoms.size() != 1) continue;
    if (bn.tops != bn.bottoms || bn.batch_norm_syncs()) continue;
    write_input_apart(specs, removed, i, blobs, bn);
  }
  std::vector<LayerSpec> kept;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(specs[i]));
  }
  specs = std::move(kept);
}

}  // namespace crema
