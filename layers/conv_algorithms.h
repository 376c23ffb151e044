// The `algorithm:` key of Convolution and Deconvolution: which CUDA version runs each pass
// (kernels/convolution/convolution_select.h has the selection itself).
//
//   algorithm: auto                        (default) the heuristic's version for every pass (in the
//                                          layer's math: get_conv_algorithm)
//   algorithm: find                        every pass measured on the device at the first forward
//   algorithm: implicit_gemm               one version pinned for every pass
//   algorithm: {forward: winograd_4x4, backward_data: find}    per pass; absent passes are auto
//
// The passes are the layer's own: a Deconvolution's forward runs the convolution's backward data
// pass and its backward data the convolution's forward (kernels/convolution/convolution.h), so
// its `forward:` names a version of the convolution's backward_data. `find` measures with no
// workspace limit, once per geometry and process (the Context's algorithm cache, which
// `--algo-cache FILE` keeps between runs), before any CUDA-graph capture (training captures its
// second step). On the CPU the key is checked but there is nothing to choose.
//
// The layer's `math:` key (fp32, tf32 or bf16; the net's model.math when absent:
// layers/layer_keys.h) is read here too: every pass runs in it, and `find` measures in it (its
// cache entries are per math). On the CPU every math computes in fp32.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "core/context.h"
#include "core/layer.h"
#include "kernels/convolution/convolution_select.h"

namespace crema {

class ConvAlgorithms {
 public:
  enum Pass { forward = 0, backward_data = 1, backward_filter = 2 };  // the layer's passes

  // Reads `algorithm:` and `math:` of `spec`; `transposed` for Deconvolution. Unknown names and
  // pass keys are errors naming the layer and the key.
  ConvAlgorithms(const LayerSpec& spec, bool transposed);

  // Fails naming the layer and the key when a pinned version does not implement its pass for
  // the (convolution) geometry g. Called by setup and reshape.
  void check(const LayerSpec& spec, const kernels::Conv2dGeometry& g) const;
  // Picks each pass's version for g on a CUDA context (get, find or the pin), once per geometry;
  // nothing on the CPU.
  void choose(Context& ctx, const kernels::Conv2dGeometry& g, const std::string& where);
  // The chosen version of a layer pass (nullopt on the CPU: the Tensor-level call ignores it).
  std::optional<kernels::cuda::ConvVersion> version(Pass pass) const { return chosen_[pass]; }
  // The arithmetic every pass runs in.
  kernels::cuda::GemmMath math() const { return math_; }
  // "forward implicit_gemm (auto), backward_data im2col_gemm (auto), backward_filter
  // implicit_gemm (find)", then ", math tf32" when not fp32; "" before a choice was made (or on
  // the CPU).
  std::string describe() const;

 private:
  kernels::cuda::ConvPass conv_pass(Pass pass) const;

  bool transposed_;
  kernels::cuda::GemmMath math_;
  std::array<kernels::ConvAlgorithmRequest, 3> requests_{};
  std::array<std::optional<kernels::cuda::ConvVersion>, 3> chosen_{};
  std::optional<kernels::Conv2dGeometry> chosen_for_;
};

}  // namespace crema
