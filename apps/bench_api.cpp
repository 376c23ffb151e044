// crema bench api: what the primitive API (kernels/api/) costs over the Tensor-level kernel it
// calls, on a memory-bound op where any extra pass shows: ReLU forward on [N, C, H, W] f32.
//   kernel         kernels::relu_forward (the baseline)
//   api-packed     api::activation_forward, packed x and y, alpha 1, beta 0 (should equal kernel)
//   api-blend      alpha 0.5, beta 0.25: the kernel into scratch, then one blend pass into y
//   api-nhwc-in    x a channels-last descriptor, y packed: one gather pass, then the kernel
//   transform      api::transform_tensor NCHW -> NHWC (the gather/scatter pass alone)
// Each row is checked against ReLU in double first; bytes are the fewest a call must move.
#include <ostream>

#include "apps/bench.h"
#include "apps/bench_memory_bound.h"
#include "kernels/activations/relu.h"
#include "kernels/api/primitives.h"

namespace crema::bench {
namespace {

namespace api = kernels::api;

// ResNet-50's stage-1 activations at batch 64, as the activation family's.
const std::vector<BatchNormShape4> kApiShapes = {{64, 256, 56, 56}};

api::TensorDesc nhwc_desc(const Tensor& t, const BatchNormShape4& s) {
  return api::TensorDesc::nhwc(t.raw(), DType::f32, t.device(), s.N, s.C, s.H, s.W);
}

}  // namespace

int bench_api(Context& ctx, const Options& options, std::ostream& out) {
  Table table = open_table(ctx, "f32 nchw", out);
  Random random(10);
  for (const BatchNormShape4& s : shapes_of(options, kApiShapes)) {
    const Shape shape{s.N, s.C, s.H, s.W};
    const Input x = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const Input prior = make_input(shape, DType::f32, Layout::nchw, random, -1.0, 1.0);
    const double tensor = double(x.exact.size()) * 4.0;
    const int copies = rotation_copies(size_t(3 * tensor));
    std::vector<Tensor> xs, ys, xhwc;
    for (int k = 0; k < copies; ++k) {
      xs.push_back(upload(ctx, x.host));
      ys.push_back(upload(ctx, prior.host));
      xhwc.push_back(ctx.empty(shape));
      api::transform_tensor(ctx, 1.0, api::TensorDesc::of(xs[k]), 0.0, nhwc_desc(xhwc[k], s));
    }
    std::vector<double> relu(x.exact.size()), blend(x.exact.size());
    for (size_t i = 0; i < relu.size(); ++i) {
      relu[i] = x.exact[i] > 0 ? x.exact[i] : 0.0;
      blend[i] = 0.5 * relu[i] + 0.25 * prior.exact[i];
    }
    const api::ActivationDesc act;  // relu
    Row row;
    row.shape = s.str() + " relu f32";
    row.tolerance = tolerance_of(DType::f32);
    row.pass = "fwd";
    const auto run = [&](const char* version, double bytes, const std::vector<double>& want,
                         const std::function<void(int)>& call) {
      ys[0].copy_from(prior.host);  // the check's call starts from the prior (api-blend reads y)
      call(0);
      row.version = version;
      row.bytes = bytes;
      row.rel_error = worst_error(ctx, {&ys[0]}, {&want});
      time_row(ctx, options, table, row, call);
    };
    run("kernel", 2 * tensor, relu,
        [&](int i) { kernels::relu_forward(ctx, xs[i % copies], ys[i % copies], 0.0f); });
    run("api-packed", 2 * tensor, relu, [&](int i) {
      const int k = i % copies;
      api::activation_forward(ctx, act, 1.0, api::TensorDesc::of(xs[k]), 0.0,
                              api::TensorDesc::of(ys[k]));
    });
    run("api-blend", 3 * tensor, blend, [&](int i) {
      const int k = i % copies;
      api::activation_forward(ctx, act, 0.5, api::TensorDesc::of(xs[k]), 0.25,
                              api::TensorDesc::of(ys[k]));
    });
    run("api-nhwc-in", 2 * tensor, relu, [&](int i) {
      const int k = i % copies;
      api::activation_forward(ctx, act, 1.0, nhwc_desc(xhwc[k], s), 0.0,
                              api::TensorDesc::of(ys[k]));
    });
    // NHWC x back to a packed NCHW y: y == x, a pure strided copy.
    run("transform", 2 * tensor, x.exact, [&](int i) {
      const int k = i % copies;
      api::transform_tensor(ctx, 1.0, nhwc_desc(xhwc[k], s), 0.0, api::TensorDesc::of(ys[k]));
    });
  }
  return table.status();
}

}  // namespace crema::bench
