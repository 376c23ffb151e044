// Reading `solver:`: the type, the keys every solver has, and each type's own keys, with their
// PyTorch defaults and Caffe's names accepted beside PyTorch's (optim/README.md has the table).
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "optim/solver.h"

namespace crema {
namespace {

using kernels::OptimizerType;

struct SolverType {
  const char* name;  // as written in messages; the config's `type` matches it in any case
  OptimizerType rule;
  std::vector<std::string> keys;  // the type's own keys, Caffe's names included
};

// Nesterov is SGD with nesterov: true (Caffe's type name for it).
const std::vector<SolverType>& solver_types() {
  static const std::vector<SolverType> types = {
      {"SGD", OptimizerType::sgd, {"momentum", "nesterov"}},
      {"Nesterov", OptimizerType::nesterov, {"momentum"}},
      {"Adam", OptimizerType::adam, {"beta1", "beta2", "eps", "momentum", "momentum2", "delta"}},
      {"AdamW", OptimizerType::adamw, {"beta1", "beta2", "eps", "momentum", "momentum2", "delta"}},
      {"RMSProp",
       OptimizerType::rmsprop,
       {"alpha", "eps", "momentum", "centered", "rms_decay", "delta"}},
      {"AdaGrad",
       OptimizerType::adagrad,
       {"lr_decay", "initial_accumulator_value", "eps", "delta"}},
  };
  return types;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

const SolverType& find_type(const ConfigNode& node) {
  const std::string type = node.get<std::string>("type", "SGD");
  std::vector<std::string> known;
  for (const SolverType& t : solver_types()) {
    if (lower(t.name) == lower(type)) return t;
    known.push_back(t.name);
  }
  node.at("type").fail("unknown solver type '" + type + "' (known: " + joined(known) + ")");
}

// A key of another solver type is a mistake worth naming (a typo is left to the caller's
// check_no_unknown_keys, which suggests the closest key).
void reject_other_types_keys(const ConfigNode& node, const SolverType& type) {
  for (const std::string& key : node.keys()) {
    if (std::count(type.keys.begin(), type.keys.end(), key) > 0) continue;
    for (const SolverType& other : solver_types()) {
      if (std::count(other.keys.begin(), other.keys.end(), key) > 0) {
        node.at(key).fail("solver." + key + " is not a key of solver type " + type.name +
                          " (its keys: " + joined(type.keys) + ")");
      }
    }
  }
}

// The value ranges a hyper-parameter can be checked against.
enum class Range { positive, non_negative, unit };  // unit: [0, 1)

// solver.<key>, or its Caffe name `alias` (not both), or `fallback`; outside `range`, an error
// at the key.
double number(const ConfigNode& node, const std::string& key, const std::string& alias,
              double fallback, Range range) {
  if (!alias.empty() && node.has(key) && node.has(alias)) {
    node.at(alias).fail("solver." + alias + " is Caffe's name for solver." + key +
                        "; give one of them");
  }
  const std::string used = !alias.empty() && node.has(alias) ? alias : key;
  if (!node.has(used)) return fallback;
  const double value = node.get<double>(used);
  const bool ok = range == Range::positive       ? value > 0
                  : range == Range::non_negative ? value >= 0
                                                 : value >= 0 && value < 1;
  if (!ok) {
    const char* what = range == Range::positive       ? "must be positive"
                       : range == Range::non_negative ? "must not be negative"
                                                      : "must be in [0, 1)";
    node.at(used).fail("solver." + used + " " + what + ", got " + node.at(used).scalar());
  }
  return value;
}

}  // namespace

SolverConfig read_solver_config(const ConfigNode& node, int64_t total_iters) {
  const SolverType& type = find_type(node);
  reject_other_types_keys(node, type);
  SolverConfig config;
  config.type = type.name;
  kernels::OptimizerRule& rule = config.rule;
  rule.type = type.rule;

  config.base_lr = node.get<double>("base_lr");
  if (!(config.base_lr > 0)) node.at("base_lr").fail("solver.base_lr must be positive");
  // PyTorch's AdamW decays by default; every other rule does only when asked.
  config.weight_decay = number(node, "weight_decay", "",
                               type.rule == OptimizerType::adamw ? 0.01 : 0.0, Range::non_negative);
  config.lr_policy = read_lr_policy(node, total_iters);
  const int64_t iter_size = node.get<int64_t>("iter_size", 1);
  if (iter_size < 1 || iter_size > (1 << 20)) {
    node.at("iter_size")
        .fail("solver.iter_size must be between 1 and 2^20, got " + std::to_string(iter_size));
  }
  config.iter_size = int(iter_size);
  config.clip_gradients = number(node, "clip_gradients", "", 0.0, Range::positive);

  switch (type.rule) {
    case OptimizerType::sgd:
    case OptimizerType::nesterov: {
      rule.momentum = number(node, "momentum", "", 0.0, Range::unit);
      if (type.rule == OptimizerType::sgd && node.get<bool>("nesterov", false)) {
        rule.type = OptimizerType::nesterov;
        config.type = "Nesterov";
      }
      if (rule.type == OptimizerType::nesterov && !(rule.momentum > 0)) {
        (node.has("nesterov") ? node.at("nesterov") : node.at("type"))
            .fail("Nesterov momentum needs solver.momentum > 0");
      }
      break;
    }
    case OptimizerType::adam:
    case OptimizerType::adamw:
      rule.beta1 = number(node, "beta1", "momentum", 0.9, Range::unit);
      rule.beta2 = number(node, "beta2", "momentum2", 0.999, Range::unit);
      rule.eps = number(node, "eps", "delta", 1e-8, Range::positive);
      break;
    case OptimizerType::rmsprop:
      rule.alpha = number(node, "alpha", "rms_decay", 0.99, Range::unit);
      rule.eps = number(node, "eps", "delta", 1e-8, Range::positive);
      rule.momentum = number(node, "momentum", "", 0.0, Range::unit);
      rule.centered = node.get<bool>("centered", false);
      break;
    case OptimizerType::adagrad:
      rule.lr_decay = number(node, "lr_decay", "", 0.0, Range::non_negative);
      rule.initial_accumulator_value =
          number(node, "initial_accumulator_value", "", 0.0, Range::non_negative);
      rule.eps = number(node, "eps", "delta", 1e-10, Range::positive);
      break;
  }
  return config;
}

std::unique_ptr<Solver> make_solver(const ConfigNode& solver, int64_t total_iters) {
  return std::make_unique<Solver>(read_solver_config(solver, total_iters));
}

}  // namespace crema
