// The `algorithm:` and `workspace_limit:` keys of Convolution and Deconvolution: how each pass's
// CUDA algorithm is chosen (kernels/convolution/select.h has the selection itself).
//
//   algorithm: auto                        (default) the heuristic's algorithm for every pass (in
//                                          the layer's math: get_conv_algorithm)
//   algorithm: find                        every pass measured on the device at its first call
//   algorithm: implicit_gemm               one algorithm pinned for every pass
//   algorithm: {forward: winograd_4x4, backward_data: find}    per pass; absent passes are auto
//   workspace_limit: 256MiB                scratch a pass may use (the net's
//                                          model.workspace_limit when absent; unlimited when
//                                          both are): auto falls back to an algorithm that fits,
//                                          find skips those that do not
//
// A limit is a byte count with an optional unit: 1048576, 512KiB, 256MiB, 2GiB (or KB, MB, GB,
// powers of 1000), or `none`. `crema train|test|time --workspace-limit 256MiB` sets
// model.workspace_limit.
//
// The passes are the layer's own: a Deconvolution's forward runs the convolution's backward data
// pass and its backward data the convolution's forward (kernels/convolution/convolution.h), so
// its `forward:` names an algorithm of the convolution's backward_data. `find` measures once per
// geometry, limit and process (the Context's algorithm cache, which `--algo-cache FILE` keeps
// between runs), at the first step, before any CUDA-graph capture (training captures its second
// step). On the CPU the keys are checked but there is nothing to choose; a build without CUDA
// has no algorithms at all, and reads `algorithm:` without checking the name.
//
// The layer's `math:` key (fp32, tf32 or bf16; the net's model.math when absent:
// layers/layer_keys.h) is read here too: every pass runs in it, and `find` measures in it (its
// cache entries are per math). On the CPU every math computes in fp32.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/layer.h"
#include "kernels/convolution/geometry_nd.h"
#include "kernels/convolution/select.h"

namespace crema {

// "256MiB" -> 268435456 (see above); nullopt when `text` is no such size.
std::optional<size_t> parse_workspace_limit(const std::string& text);

class ConvAlgorithms {
 public:
  enum Pass { forward = 0, backward_data = 1, backward_filter = 2 };  // the layer's passes

  // Reads `algorithm:`, `workspace_limit:` and `math:` of `spec`; `transposed` for
  // Deconvolution. Unknown names, sizes and pass keys are errors naming the file, line and
  // column, the layer and the key.
  ConvAlgorithms(const LayerSpec& spec, bool transposed);

  // What setup and reshape of both layers check of the (convolution) geometry g: that it is
  // valid (Conv2dGeometry::validate) and that every pinned algorithm implements its pass for it;
  // fails naming the layer (and the key).
  void check(const LayerSpec& spec, const kernels::Conv2dGeometry& g) const;
  // The same for an N-d geometry: 1-D and 2-D run the 2-D algorithms (the check above on
  // g.as_2d()); 3-D has one algorithm, so a pinned one is an error naming the layer and the key.
  void check(const LayerSpec& spec, const kernels::ConvNdGeometry& g) const;
  // What a layer pass asks the Tensor-level call for: the request, carrying this layer's memo
  // of the choice (the selection fills it at the first call and reuses it while g stays).
  kernels::ConvRequest request(Pass pass);
  // The request without the memo, as the memory plan reads it before any pass has run (find's
  // choice unknown yet: conv2d_workspace_bytes takes the heuristic's), and the convolution pass
  // a layer pass runs.
  kernels::ConvRequest planned_request(Pass pass) const { return requests_[pass]; }
  kernels::ConvPass pass_of(Pass pass) const { return pass_[pass]; }
  // "forward implicit_gemm (auto), backward_data im2col_gemm (auto), backward_filter
  // implicit_gemm (find)", then ", math tf32" when not fp32; the passes not chosen yet (or on
  // the CPU) are left out.
  std::string describe() const;
  // ", math tf32" (or bf16) when the math is not fp32, else "": what describe() ends with.
  std::string describe_math() const;
  // The layer's math (what an nhwc pass's kernel depends on: conv2d_nhwc_kernel).
  kernels::cuda::GemmMath math() const { return math_; }

 private:
  std::array<kernels::ConvRequest, 3> requests_{};
  std::array<kernels::ConvPass, 3> pass_{};  // the convolution pass each layer pass runs
  std::array<kernels::ConvMemo, 3> memos_{};
  kernels::cuda::GemmMath math_;
};

}  // namespace crema
