// Nets both views tests build (net_windows_test.cpp on the CPU, net_windows_cuda_test.cpp on
// CUDA), core/VIEWS.md.
#pragma once

namespace crema::testing {

// Slices along the batch with ReLUs on the pieces (their backward reads their tops, so the
// pieces die at their forward), joined again: no Concat windows (a ReLU writes none, as no layer
// on the GPU does). The Slice's views lower the peak of the lives, but the greedy packing fits
// them worse: the plan drops them unless concat_views is `always`.
inline const char* const kSlicesThroughReLUs = R"(
inputs: {data: [8, 8, 8], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 8, kernel_size: 3, pad: 1}
  - {name: slice, type: Slice, bottom: conv0, top: [s0, s1], axis: 0, slice_point: [2]}
  - {name: relu_a, type: ReLU, bottom: s0, top: a}
  - {name: relu_b, type: ReLU, bottom: s1, top: b}
  - {name: cat, type: Concat, bottom: [a, b], top: cat, axis: 0}
  - {name: conv_d, type: Convolution, bottom: cat, top: d, num_output: 4, kernel_size: 3}
  - {name: fc, type: InnerProduct, bottom: d, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

}  // namespace crema::testing
