// Errors about a layer's YAML keys: the message names the layer and the key, and points at the
// key's value in the file (or at the layer, when the key was left at a default that does not fit
// the bottoms).
#pragma once

#include <string>

#include "core/error.h"
#include "core/layer.h"

namespace crema {

// Throws crema::Error "file:line:col: layer 'name' (Type): key: message".
[[noreturn]] inline void fail_at_key(const LayerSpec& spec, const std::string& key,
                                     const std::string& message) {
  const std::string text = "layer '" + spec.name + "' (" + spec.type + "): " + key + ": " + message;
  if (spec.node != nullptr) {
    if (spec.node->has(key)) spec.node->at(key).fail(text);
    spec.node->fail(text);
  }
  throw Error(text);
}

// A required key that is missing: "layer 'conv1' (Convolution): num_output: required ...", or,
// when the layer has a key that looks like a misspelling of it, that key named as unknown at its
// own place: "x.yaml:7:47: layer 'conv1' (Convolution): unknown key 'num_ouput' (did you mean
// 'num_output'? it is required)".
[[noreturn]] inline void fail_missing_key(const LayerSpec& spec, const std::string& key,
                                          const std::string& message) {
  if (spec.node != nullptr) {
    const std::string typo = spec.node->misspelling_of(key);
    if (!typo.empty()) {
      spec.node->fail_at_key(typo, "layer '" + spec.name + "' (" + spec.type + "): unknown key '" +
                                       typo + "' (did you mean '" + key + "'? it is required)");
    }
  }
  fail_at_key(spec, key, message);
}

// An axis given as -ndim .. ndim-1 (negative counts from the end), as an index 0 .. ndim-1;
// anything else is an error at `key`.
inline int canonical_axis(const LayerSpec& spec, const std::string& key, int axis, int ndim) {
  if (axis < -ndim || axis >= ndim) {
    fail_at_key(spec, key,
                std::to_string(axis) + " is out of range for a " + std::to_string(ndim) +
                    "-D bottom (valid: " + std::to_string(-ndim) + " to " +
                    std::to_string(ndim - 1) + ")");
  }
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace crema
