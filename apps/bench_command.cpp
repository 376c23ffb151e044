// crema bench: the command's one dispatch point, from the op's name to its family (bench_gemm.cpp,
// bench_conv.cpp, bench_conv_tc.cpp, bench_rnn.cpp, bench_batch_norm.cpp, bench_memory_bound.cpp,
// bench_pooling_ops.cpp, bench_pointwise_ops.cpp, bench_tensor_ops.cpp, bench_training_ops.cpp,
// bench_api.cpp).
// The families call the cuda:: versions directly, which a build without CUDA does not have: there
// the command only says so.
#include <algorithm>
#include <ostream>

#include "apps/bench.h"
#include "core/build_config.h"
#include "core/error.h"

namespace crema::bench {

int bench_command(const std::string& op, const std::string& device, const Options& options,
                  std::ostream& out) {
  // The memory-bound families with N,C,H,W shapes (softmax's are N,C; optimizer's fixed).
  const bool memory_bound = std::find(kMemoryBoundOps.begin(), kMemoryBoundOps.end(), op) !=
                            kMemoryBoundOps.end();
  const std::vector<std::string> ops = bench_ops();
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
    std::string known;
    for (const std::string& name : ops) known += (known.empty() ? "" : ", ") + name;
    throw Error("crema bench: unknown op '" + op + "' (" + known + ")");
  }
  check_options(options);
  // Shapes first, so that a typo is reported as one also on a machine without a GPU.
  for (const std::string& shape : options.shapes) {
    if (op == "gemm") parse_gemm_shapes(shape);
    if (op == "conv" || op == "conv-tc") parse_conv_shape(shape);
    if (op == "batch-norm" || memory_bound) parse_batch_norm_shape(shape);
    if (op == "softmax") parse_softmax_shape(shape);
  }
  const Device dev = Device::parse(device);
  if (!dev.is_cuda()) {
    throw Error("crema bench times CUDA kernels; --device " + device +
                " is not a GPU (use --device cuda:N)");
  }
  // A discarded branch needs no definition of what it calls: a build without CUDA links.
  if constexpr (kBuiltWithCuda) {
    Context ctx(dev);
    if (op == "gemm") return bench_gemm(ctx, options, out);
    if (op == "conv") return bench_conv(ctx, options, out);
    if (op == "conv-tc") return bench_conv_tc(ctx, options, out);
    if (op == "batch-norm") return bench_batch_norm(ctx, options, out);
    if (op == "layer-norm") return bench_layer_norm(ctx, options, out);
    if (op == "global-pool") return bench_global_pool(ctx, options, out);
    if (op == "pooling") return bench_pooling(ctx, options, out);
    if (op == "softmax") return bench_softmax(ctx, options, out);
    if (op == "lrn") return bench_lrn(ctx, options, out);
    if (op == "activation") return bench_activation(ctx, options, out);
    if (op == "eltwise") return bench_eltwise(ctx, options, out);
    if (op == "dropout") return bench_dropout(ctx, options, out);
    if (op == "concat") return bench_concat(ctx, options, out);
    if (op == "op-tensor") return bench_op_tensor(ctx, options, out);
    if (op == "reduce-tensor") return bench_reduce_tensor(ctx, options, out);
    if (op == "transform-tensor") return bench_transform_tensor(ctx, options, out);
    if (op == "scale") return bench_scale(ctx, options, out);
    if (op == "cast") return bench_cast(ctx, options, out);
    if (op == "layout") return bench_layout(ctx, options, out);
    if (op == "loss") return bench_loss(ctx, options, out);
    if (op == "accuracy") return bench_accuracy(ctx, options, out);
    if (op == "optimizer") return bench_optimizer(ctx, options, out);
    if (op == "im2col") return bench_im2col(ctx, options, out);
    if (op == "lcn") return bench_lcn(ctx, options, out);
    if (op == "api") return bench_api(ctx, options, out);
    return bench_rnn(ctx, options, out);
  } else {
    throw Error("crema bench: this build has no CUDA backend");
  }
}

}  // namespace crema::bench
