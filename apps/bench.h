// crema bench: for one op, a list of shapes and every version (or one), check each version
// against the op's reference, then time it with CUDA events and print the time, the achieved
// TFLOP/s or GB/s and the fraction of the device's peak.
//
//   crema bench gemm|conv|conv-tc|rnn|batch-norm|softmax|optimizer|OP [--shape S]... [--version V]
//               (OP: a memory-bound op of kMemoryBoundOps)
//                             [--math fp32|tf32|bf16]
//                             [--layout nchw|nhwc] [--warmup 5] [--repeats 50] [--device cuda:0]
//
// Each op family lives in its own file (bench_gemm.cpp, bench_conv.cpp, bench_rnn.cpp,
// bench_batch_norm.cpp; the memory-bound ones bench_memory_bound.cpp, bench_pooling_ops.cpp,
// bench_pointwise_ops.cpp, bench_tensor_ops.cpp, bench_training_ops.cpp and bench_api.cpp, with
// bench_memory_bound.h's helpers) and uses the shared pieces below
// (bench_conv_tc.cpp: conv-tc);
// apps/README.md says how to add one more.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"

namespace crema::bench {

struct Options {
  std::vector<std::string> shapes;  // empty: the op's default list (the peer's benchmark shapes)
  std::string version;              // empty: every version that supports the shape
  std::string math = "fp32";        // fp32 | tf32 | bf16 (ops without math modes accept fp32 only)
  std::string layout = "nchw";      // conv: nchw | nhwc (the raw NHWC passes, no transforms)
  int warmup = 5;
  int repeats = 50;
};
// Throws crema::Error for a math mode other than fp32|tf32|bf16, a layout other than nchw|nhwc,
// warmup < 0 or repeats < 1.
void check_options(const Options& options);
// The command: opens `device` (a CUDA device: crema::Error naming the device otherwise), checks
// the options, and runs the family `op` (gemm, conv or rnn). Returns the exit status.
int bench_command(const std::string& op, const std::string& device, const Options& options,
                  std::ostream& out);

// What the device can do at most, for "fraction of peak" (from its name; zeros when unknown).
struct DevicePeak {
  std::string name;
  double fp32_tflops = 0, tf32_tflops = 0, bf16_tflops = 0;  // dense tensor-core peaks
  double dram_gbps = 0;
};
DevicePeak device_peak(const Context& ctx);

// Calls `launch(i)` (which queues work on ctx.stream()) `warmup` times, then times `repeats`
// samples of `burst` back-to-back calls each with CUDA events, each queued behind a hold of the
// stream (gpu::hold: no launch gap inside), and returns the median of sample / burst in
// milliseconds. `i` counts calls from 0, so a benchmark can rotate among several
// input copies larger than L2 (see rotation_copies).
double median_ms(Context& ctx, int warmup, int repeats, const std::function<void(int)>& launch,
                 int burst = 1);
// How many back-to-back calls one timed sample of a call taking `single_ms` holds: enough for
// about 0.2 ms (1 from 0.2 ms up; at most 200), so a short call's time holds no launch gap.
// scripts/bench/cuda_timing.py applies the same rule to the PyTorch peers.
int burst_for(double single_ms);
// median_ms with options.warmup and options.repeats, both cut down for a slow call (a naive
// kernel on a large shape) so that one row takes about two seconds at most, and bursts for a short
// one (burst_for): the median of three single calls, after one untimed call, sizes the row.
double measure_ms(Context& ctx, const Options& options, const std::function<void(int)>& launch);
// How many copies of a working set of `bytes` make the rotation exceed L2 several times over
// (at least 1; about 200 MB of traffic between reuses of one copy).
int rotation_copies(size_t bytes);

// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written) over 1 GB: the ceiling
// the memory-bound ops' %peak column is of.
double copy_gbps(Context& ctx);
// ||out - ref|| / ||ref|| over n values (ref in double).
double relative_error(const float* out, const double* ref, size_t n);

// One printed line per (shape, version): the check and the timing.
struct Row {
  std::string shape, version;
  double rel_error = 0, tolerance = 0;  // passed when rel_error <= tolerance
  double ms = 0;
  double flops = 0;  // per call; 0 when the op is memory-bound
  double bytes = 0;  // the fewest bytes one call must move
  std::string peak;  // which peak the fraction is of: "fp32", "tf32", "bf16", "dram"
  std::string pass;  // conv: fwd | dgrad | wgrad (the peer benchmark's names); "" for others
  double workspace_bytes = 0;
  std::string check;  // what the output was compared with: "ref", "cpu", "sampled2048", ...
};
class Table {
 public:
  Table(std::ostream& out, DevicePeak peak);
  void print(const Row& row);
  // 0 when every row passed its check, 1 otherwise (the command's exit status).
  int status() const { return failed_ ? 1 : 0; }

 private:
  std::ostream& out_;
  DevicePeak peak_;
  bool header_printed_ = false;
  bool failed_ = false;
};

// The op families. Each returns the command's exit status (1 when a check failed) and throws
// crema::Error for a shape or version it cannot parse or run.
int bench_gemm(Context& ctx, const Options& options, std::ostream& out);
int bench_conv(Context& ctx, const Options& options, std::ostream& out);
// conv-tc: the convolutions on bf16 and fp16 NHWC tensors (bench_conv_tc.cpp).
int bench_conv_tc(Context& ctx, const Options& options, std::ostream& out);
int bench_rnn(Context& ctx, const Options& options, std::ostream& out);
// batch-norm: the channels-last (S == 1) versions, plain, + ReLU and + add + ReLU, bf16 storage
// for --math bf16, f32 otherwise (bench_batch_norm.cpp).
int bench_batch_norm(Context& ctx, const Options& options, std::ostream& out);
// layer-norm: LayerNorm over the channels (rows of C under --layout nhwc, as ConvNeXt's blocks);
// global-pool: average pooling over H x W (squeeze-excitation); bf16 storage for --math bf16, f32
// otherwise (bench_memory_bound.cpp). Shapes as batch-norm's, N,C,H,W.
int bench_layer_norm(Context& ctx, const Options& options, std::ostream& out);
int bench_global_pool(Context& ctx, const Options& options, std::ostream& out);
// pooling: max and average, 3x3 s2 p1 and 2x2 s2, forward and backward (bf16 for --math bf16,
// --layout nchw or nhwc); lrn: AlexNet's LRN, f32 nchw; softmax: over C of [N, C], f32; each in
// every CUDA version or --version's (bench_pooling_ops.cpp). Shapes N,C,H,W, softmax's N,C.
int bench_pooling(Context& ctx, const Options& options, std::ostream& out);
int bench_lrn(Context& ctx, const Options& options, std::ostream& out);
int bench_softmax(Context& ctx, const Options& options, std::ostream& out);
// activation (relu, sigmoid, tanh, silu, gelu, gelu_tanh), eltwise (a + b, a += b), dropout (p 0.5)
// and concat (two parts along C), forward and backward, bf16 for --math bf16
// (bench_pointwise_ops.cpp). Shapes N,C,H,W (concat: each part's).
int bench_activation(Context& ctx, const Options& options, std::ostream& out);
int bench_eltwise(Context& ctx, const Options& options, std::ostream& out);
int bench_dropout(Context& ctx, const Options& options, std::ostream& out);
int bench_concat(Context& ctx, const Options& options, std::ostream& out);
// op-tensor (add with a [1, C, 1, 1] b, mul), reduce-tensor (sum over H x W, amax over all),
// transform-tensor (NCHW -> NHWC), scale (forward; the backward's parameter sums), cast (f32 <->
// bf16), layout (nchw_to_nhwc, nhwc_to_nchw): f32 (bench_tensor_ops.cpp). Shapes N,C,H,W.
int bench_op_tensor(Context& ctx, const Options& options, std::ostream& out);
int bench_reduce_tensor(Context& ctx, const Options& options, std::ostream& out);
int bench_transform_tensor(Context& ctx, const Options& options, std::ostream& out);
int bench_scale(Context& ctx, const Options& options, std::ostream& out);
int bench_cast(Context& ctx, const Options& options, std::ostream& out);
int bench_layout(Context& ctx, const Options& options, std::ostream& out);
// loss (softmax with cross-entropy over C), accuracy (top-1), optimizer (sgd and adam over a
// CIFAR ResNet-18's weights; no --shape), im2col (3x3, pad 1), lcn (5 x 5), f32
// (bench_training_ops.cpp). Shapes N,C,H,W.
int bench_loss(Context& ctx, const Options& options, std::ostream& out);
int bench_accuracy(Context& ctx, const Options& options, std::ostream& out);
int bench_optimizer(Context& ctx, const Options& options, std::ostream& out);
int bench_im2col(Context& ctx, const Options& options, std::ostream& out);
int bench_lcn(Context& ctx, const Options& options, std::ostream& out);
// api: what the primitive API (kernels/api/) costs over the kernel it calls: ReLU forward through
// the kernel, the API packed, with a blend, from a channels-last x, and the strided transform
// alone; f32 (bench_api.cpp). Shapes N,C,H,W.
int bench_api(Context& ctx, const Options& options, std::ostream& out);
// The memory-bound ops with N,C,H,W shapes, as `crema bench` spells them.
inline const std::vector<std::string> kMemoryBoundOps = {
    "layer-norm",       "global-pool", "pooling", "lrn",       "activation",
    "eltwise",          "dropout",     "concat",  "op-tensor", "reduce-tensor",
    "transform-tensor", "scale",       "cast",    "layout",    "loss",
    "accuracy",         "im2col",      "lcn",     "api"};
// Every op `crema bench` knows: gemm, conv, conv-tc, rnn, batch-norm, softmax, optimizer, then
// kMemoryBoundOps.
inline std::vector<std::string> bench_ops() {
  std::vector<std::string> all{"gemm", "conv", "conv-tc", "rnn", "batch-norm", "softmax",
                               "optimizer"};
  all.insert(all.end(), kMemoryBoundOps.begin(), kMemoryBoundOps.end());
  return all;
}

// Shapes, as --shape spells them.
// GEMM "M,N,K[,NN|NT|TN|TT]": C[M,N] = op(A)[M,K] op(B)[K,N], a letter T transposing that operand
// (stored [K,M] or [N,K]); NN by default.
struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  std::string str() const;  // "8192,8192,8192,NN"
};
GemmShape parse_gemm_shape(const std::string& text);
// One shape, or a named list: "convnext-t", the six GEMMs of each of ConvNeXt-T's four stages'
// MLP at batch 64 (per linear: forward NT, weight gradient TN, input gradient NN).
std::vector<GemmShape> parse_gemm_shapes(const std::string& text);
// 8192^3, then the GEMMs of the default convolutions (as implicit GEMMs: [K, C*R*S] x [C*R*S,
// N*P*Q]) and of LeNet's inner products.
std::vector<GemmShape> default_gemm_shapes();
// Convolution "N,C,H,W,K,R[xS][,s2][,p1][,d2][,g2]" (stride, padding, dilation, groups: one
// number for both axes or HxW, "s2x1"), or the name of a default shape.
struct ConvShape {
  std::string name;  // the default list's name, else the text as given
  kernels::Conv2dGeometry g;
};
ConvShape parse_conv_shape(const std::string& text);
// The convolutions of the peer benchmark (/work/shared/bench/peer_cudnn.py), with its names.
std::vector<ConvShape> default_conv_shapes();
// `--shape depthwise`: the distinct depthwise layers of MobileNetV2, EfficientNet-B0 and
// ConvNeXt-T at batch 64 (3x3, 5x5, 7x7; strides 1 and 2; "dw 3x3s2 c96 112x112 n64"), in the
// order of scripts/bench/peer_conv_depthwise.py; each name is also a --shape of its own.
constexpr const char* kDepthwiseList = "depthwise";
std::vector<ConvShape> depthwise_conv_shapes();
// The depthwise kernel versions (kernels/convolution/convolution_depthwise_nhwc.h) that run `pass`
// of g in `type` on aligned tensors, each once, production's (choose()) last: the row
// scripts/bench/peer_conv_depthwise.py pairs with PyTorch's. A row's version column is
// depthwise_row_name's: `prefix` + "_v2", '*' on production's; --version keeps only the one named.
std::vector<kernels::cuda::depthwise_nhwc::Version> depthwise_versions(
    kernels::cuda::depthwise_nhwc::Pass pass, const kernels::Conv2dGeometry& g,
    kernels::cuda::depthwise_nhwc::Element type);
std::string depthwise_row_name(const std::string& prefix,
                               kernels::cuda::depthwise_nhwc::Version version, bool production);
// The --shape arguments of conv and conv-tc: each parse_conv_shape's, "depthwise" the list above.
std::vector<ConvShape> parse_conv_shapes(const std::vector<std::string>& texts);
// Batch norm "N,C,H,W": x [N, C, H, W] in nhwc (channels-last), normalized as N*H*W rows of C.
struct BatchNormShape4 {
  int64_t N = 0, C = 0, H = 0, W = 0;
  std::string str() const;  // "128,256,56,56"
};
BatchNormShape4 parse_batch_norm_shape(const std::string& text);
// Softmax "N,C": the two extents; throws crema::Error naming the --shape otherwise.
std::vector<int64_t> parse_softmax_shape(const std::string& text);
// ResNet-50's batch norms at batch 128, 224x224 (scripts/bench/peer_batch_norm.py's list).
std::vector<BatchNormShape4> default_batch_norm_shapes();

}  // namespace crema::bench
