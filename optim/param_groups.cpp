#include "optim/param_groups.h"

#include <regex>
#include <string>
#include <vector>

namespace crema {
namespace {

struct ParamGroup {
  const ConfigNode* node;
  std::regex match;
  float lr_mult = 1.0f;
  float decay_mult = 1.0f;
  int64_t matched = 0;  // parameters this group decided
};

float multiplier(const ConfigNode& group, const std::string& key) {
  const float value = group.get<float>(key, 1.0f);
  if (!(value >= 0.0f)) {
    group.at(key).fail("solver.param_groups: " + key + " must not be negative, got " +
                       group.at(key).scalar());
  }
  return value;
}

std::vector<ParamGroup> read_groups(const ConfigNode& list) {
  if (!list.is_sequence()) {
    list.fail("solver.param_groups: expected a list such as [{match: \"fc\\\\..*\", lr_mult: 1}]");
  }
  std::vector<ParamGroup> groups;
  for (size_t i = 0; i < list.size(); ++i) {
    const ConfigNode& group = list[i];
    if (!group.is_map()) group.fail("solver.param_groups: each group is a map {match: REGEX, ...}");
    ParamGroup g{&group, {}};
    const std::string pattern = group.get<std::string>("match");
    try {
      g.match = std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      group.at("match").fail("solver.param_groups: '" + pattern +
                             "' is not a regular expression (" + e.what() + ")");
    }
    g.lr_mult = multiplier(group, "lr_mult");
    g.decay_mult = multiplier(group, "decay_mult");
    group.check_no_unknown_keys("a group of solver.param_groups");
    groups.push_back(std::move(g));
  }
  return groups;
}

enum class FreezeBatchNorm { no, stats, all };

FreezeBatchNorm freeze_batch_norm(const ConfigNode& solver) {
  if (!solver.has("freeze_batch_norm")) return FreezeBatchNorm::no;
  const std::string value = solver.at("freeze_batch_norm").scalar();
  if (value == "true") return FreezeBatchNorm::all;
  if (value == "stats") return FreezeBatchNorm::stats;
  if (value == "false") return FreezeBatchNorm::no;
  solver.at("freeze_batch_norm")
      .fail(
          "solver.freeze_batch_norm must be true (statistics and weights), stats (statistics "
          "only) or false, got '" +
          value + "'");
}

}  // namespace

std::vector<std::string> batch_norm_overrides(const ConfigNode& root) {
  if (!root.has("solver") || freeze_batch_norm(root.at("solver")) == FreezeBatchNorm::no ||
      !root.has("model") || !root.at("model").has("layers")) {
    return {};
  }
  const ConfigNode& layers = root.at("model").at("layers");
  std::vector<std::string> overrides;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].is_map() && layers[i].has("type") &&
        layers[i].at("type").scalar() == "BatchNorm") {
      overrides.push_back("++model.layers." + std::to_string(i) + ".use_global_stats=true");
    }
  }
  return overrides;
}

void apply_param_groups(const ConfigNode& solver, Net& net) {
  if (freeze_batch_norm(solver) == FreezeBatchNorm::all) {
    for (size_t i = 0; i < net.num_layers(); ++i) {
      const std::string& type = net.layer(i).type();
      if (type != "BatchNorm" && type != "BatchNormReLU") continue;  // fused: core/net_fusion.h
      for (Param& p : net.layer(i).params()) p.lr_mult = 0.0f;
    }
  }
  if (!solver.has("param_groups")) {
    net.decide_backward();
    return;
  }
  std::vector<ParamGroup> groups = read_groups(solver.at("param_groups"));
  for (size_t i = 0; i < net.num_layers(); ++i) {
    for (Param& p : net.layer(i).params()) {
      for (ParamGroup& g : groups) {
        if (!std::regex_match(p.name, g.match)) continue;
        p.lr_mult *= g.lr_mult;
        p.decay_mult *= g.decay_mult;
        ++g.matched;
        break;
      }
    }
  }
  for (const ParamGroup& g : groups) {
    if (g.matched > 0) continue;
    const ConfigNode& match = g.node->at("match");
    std::string names;
    for (const Param* p : net.learnable_params()) {
      if (names.size() > 200) {
        names += ", ...";
        break;
      }
      names += (names.empty() ? "" : ", ") + p->name;
    }
    match.fail("solver.param_groups: '" + match.scalar() +
               "' matches no parameter that an earlier group left (the parameters: " + names + ")");
  }
  net.decide_backward();
}

ParameterCounts count_parameters(const Net& net) {
  ParameterCounts counts;
  for (const Param* p : net.learnable_params()) {
    (p->frozen() ? counts.frozen : counts.trainable) += p->value.numel();
  }
  return counts;
}

}  // namespace crema
