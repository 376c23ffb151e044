// A convolution algorithm as one record: its name, what it supports, the workspace each pass
// needs and the three passes themselves (cuDNN's fwd, bwd data and bwd filter algos in one
// place). Everything a version does differently lives in its record, so choosing one
// (select.h) and running it (convolution.cpp) never ask which version it is.
//
//   production   conv_algorithms(): the records `auto` and `find` choose among (algorithms.cpp)
//   ladder       conv_ladder(): production plus the rungs kept to teach and measure
//                (ladder/ladder.cpp, built into crema_kernel_ladders: the tests and `crema bench`)
//
// A record's passes are CUDA code on device pointers, queued on `stream`: no host
// synchronization, no allocation, so a training step can be captured in a CUDA graph. Every
// record is deterministic (no atomics; every sum's order depends on the geometry only).
// Tensors of 2^31 elements or more are not supported (select.h checks).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/common/dispatch.h"
#include "kernels/convolution/geometry.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels {

// The three passes an algorithm implements.
enum class ConvPass { forward, backward_data, backward_filter };
const char* conv_pass_name(ConvPass pass);

struct ConvAlgorithm {
  // y = conv(x, w) + bias (bias may be null); y is written.
  using Forward = void (*)(const Conv2dGeometry& g, const float* x, const float* w,
                           const float* bias, float* y, float* workspace, gpu::Stream stream,
                           cuda::GemmMath math);
  // dx is written.
  using BackwardData = void (*)(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                                float* workspace, gpu::Stream stream, cuda::GemmMath math);
  // dw += ..., and db += ... when db is not null (with_bias of the workspace query).
  using BackwardFilter = void (*)(const Conv2dGeometry& g, const float* x, const float* dy,
                                  float* dw, float* db, float* workspace, gpu::Stream stream,
                                  cuda::GemmMath math);

  const char* name;  // as YAML's `algorithm:` and `crema bench conv` spell it: "implicit_gemm"
  int rung;          // its place on the ladder (README.md): v1 .. v10
  // The tensors the passes read and write: element type and activation layout (today every
  // record is f32 NCHW; an NHWC record would read channels-last tensors with no transposes).
  DType dtype;
  Layout layout;
  // Whether it implements `pass` for g, and in words what it needs when it does not.
  bool (*supports)(ConvPass pass, const Conv2dGeometry& g);
  const char* requirement;
  // Whether it computes `pass` in `math` (kernels/gemm/gemm.h); the passes that do not compute
  // in fp32 whatever the math, as cuDNN's algorithms without a tensor-core path do.
  bool (*computes_in)(ConvPass pass, cuda::GemmMath math);
  // Floats of scratch `pass` needs on g (0 where it does not support g); with_bias: the filter
  // pass also accumulates db.
  size_t (*workspace)(ConvPass pass, const Conv2dGeometry& g, bool with_bias);
  Forward forward;
  BackwardData backward_data;
  BackwardFilter backward_filter;
};

// The production records, in ladder order.
const std::vector<const ConvAlgorithm*>& conv_algorithms();
// The production record called `name`; nullptr when there is none.
const ConvAlgorithm* conv_algorithm_named(const std::string& name);
// Every record, production's and the ladder's, in ladder order (kernels/convolution/ladder/:
// linked by the tests and `crema bench`, not by the library `crema train` runs).
const std::vector<const ConvAlgorithm*>& conv_ladder();

// For records: a pass every geometry supports; computes in every math; computes in fp32 only.
bool supports_every_geometry(ConvPass pass, const Conv2dGeometry& g);
bool computes_in_every_math(ConvPass pass, cuda::GemmMath math);
bool computes_in_fp32_only(ConvPass pass, cuda::GemmMath math);

}  // namespace crema::kernels
