// SyncBatchNorm (layers/sync_batch_norm.cpp) with the ranks as threads of this process over the
// sockets' group (the CPU's collective):
//   - two ranks with half the batch each compute what BatchNorm computes on the whole batch: the
//     forward values, the input gradients, the parameter gradients (the sum of the ranks') and the
//     running statistics (every rank's), over two steps;
//   - the gradient of the ranks' summed loss by central differences, in double, for every input
//     of both ranks and every parameter;
//   - without a collective, or with one of a single rank, the layer is BatchNorm, bit for bit;
//   - sync: true with mode: per_activation is refused naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "apps/distributed/launcher.h"
#include "apps/distributed/process_group.h"
#include "core/collective.h"
#include "core/error.h"
#include "tests/support/error_text.h"
#include "tests/support/layer_harness.h"

namespace crema {
namespace {

using testing::LayerHarness;
using testing::random_values;
using testing::set_values;

distributed::World world_of(int rank, int size, int port) {
  distributed::World w;
  w.rank = rank;
  w.size = size;
  w.master_addr = "127.0.0.1";
  w.master_port = port;
  w.launcher = "torchrun";
  return w;
}

// Runs body(rank, group) in one thread per rank, each joined to a sockets' group of `size`;
// returns each rank's error text ("" for none).
std::vector<std::string> run_ranks(
    int size, const std::function<void(int, distributed::ProcessGroup&)>& body) {
  const int port = distributed::free_port();
  std::vector<std::future<std::string>> results;
  for (int r = 0; r < size; ++r) {
    results.push_back(std::async(std::launch::async, [&, r]() -> std::string {
      try {
        auto group = distributed::join_process_group(world_of(r, size, port), Device::cpu(), 5, 20);
        body(r, *group);
      } catch (const Error& e) {
        return e.what();
      }
      return "";
    }));
  }
  std::vector<std::string> errors;
  for (auto& f : results) errors.push_back(f.get());
  return errors;
}

std::vector<float> part(const std::vector<float>& v, int rank, int ranks) {
  const size_t n = v.size() / size_t(ranks);
  return {v.begin() + long(n * size_t(rank)), v.begin() + long(n * size_t(rank + 1))};
}

// Inputs with a different offset per channel (a wrong channel shows; the mean is not 0).
std::vector<float> channel_values(const Shape& shape, uint64_t seed) {
  std::vector<float> v = random_values(size_t(shape_numel(shape)), -1.0f, 1.0f, seed);
  const int64_t C = shape[1], S = shape_count(shape, 2, int(shape.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] += 0.7f * float((int64_t(i) / S) % C) - 0.5f;
  return v;
}

// What one rank (or the whole-batch BatchNorm) produced in a step.
struct StepValues {
  std::vector<float> y, dx, dgamma, dbeta, running_mean, running_var, batches;
};

// Forward and backward of `h` on x with top gradient dy, the parameter gradients zeroed first.
StepValues step(LayerHarness& h, const std::vector<float>& x, const std::vector<float>& dy) {
  h.set_bottom(0, x);
  h.forward();
  set_values(h.top[0]->grad, dy);
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, h.ctx);
  const auto& params = h.layer->params();
  const auto& buffers = h.layer->buffers();
  return {h.top[0]->value.to_vector(), h.bottom[0]->grad.to_vector(), params[0].grad.to_vector(),
          params[1].grad.to_vector(),  buffers[0].value.to_vector(),  buffers[1].value.to_vector(),
          buffers[2].value.to_vector()};
}

// |a - b| <= tolerance * max(1, |b|) elementwise.
void expect_near(const std::vector<float>& a, const std::vector<float>& b, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::fabs(double(a[i]) - double(b[i])),
              tolerance * std::max(1.0, std::fabs(double(b[i]))))
        << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
}

void sync_equals_whole_batch(const std::string& keys, const Shape& whole, int ranks) {
  SCOPED_TRACE(keys + " " + shape_str(whole) + " on " + std::to_string(ranks) + " ranks");
  const std::string plain = "{name: bn, type: BatchNorm" + keys + "}";
  const std::string sync = "{name: bn, type: BatchNorm, sync: true" + keys + "}";
  Shape shard = whole;
  shard[0] /= ranks;
  const int kSteps = 2;
  std::vector<std::vector<float>> xs, dys;
  for (int s = 0; s < kSteps; ++s) {
    xs.push_back(channel_values(whole, 11 + uint64_t(s)));
    dys.push_back(random_values(size_t(shape_numel(whole)), -1.0f, 1.0f, 21 + uint64_t(s)));
  }
  Context ctx;
  LayerHarness bn(plain, {whole}, ctx);
  std::vector<StepValues> expected;
  for (int s = 0; s < kSteps; ++s) expected.push_back(step(bn, xs[size_t(s)], dys[size_t(s)]));

  std::vector<std::vector<StepValues>> got(static_cast<size_t>(ranks));
  const auto errors = run_ranks(ranks, [&](int r, distributed::ProcessGroup& group) {
    Context here(Device::cpu(), 1, 1);
    LayerHarness h(sync, {shard}, here);
    dynamic_cast<UsesCollective&>(*h.layer).set_collective(&group);
    for (int s = 0; s < kSteps; ++s) {
      got[size_t(r)].push_back(
          step(h, part(xs[size_t(s)], r, ranks), part(dys[size_t(s)], r, ranks)));
    }
  });
  for (const std::string& e : errors) ASSERT_EQ(e, "");

  // float32 values from statistics computed in double both ways (BatchNorm: two passes; here:
  // sum x and sum x^2 over the ranks), each rounded once to float: a few float ulps apart.
  const double kTolerance = 1e-5;
  for (int s = 0; s < kSteps; ++s) {
    const StepValues& want = expected[size_t(s)];
    std::vector<float> dgamma(want.dgamma.size(), 0.0f), dbeta(want.dbeta.size(), 0.0f);
    for (int r = 0; r < ranks; ++r) {
      const StepValues& v = got[size_t(r)][size_t(s)];
      const std::string at = "step " + std::to_string(s) + " rank " + std::to_string(r) + ": ";
      expect_near(v.y, part(want.y, r, ranks), kTolerance, at + "y");
      expect_near(v.dx, part(want.dx, r, ranks), kTolerance, at + "dx");
      expect_near(v.running_mean, want.running_mean, kTolerance, at + "running_mean");
      expect_near(v.running_var, want.running_var, kTolerance, at + "running_var");
      EXPECT_EQ(v.batches, want.batches) << at;
      for (size_t c = 0; c < dgamma.size(); ++c) {
        dgamma[c] += v.dgamma[c];
        dbeta[c] += v.dbeta[c];
      }
    }
    expect_near(dgamma, want.dgamma, kTolerance, "step " + std::to_string(s) + ": sum of dgamma");
    expect_near(dbeta, want.dbeta, kTolerance, "step " + std::to_string(s) + ": sum of dbeta");
  }
}

TEST(SyncBatchNorm, TwoRanksOfHalfTheBatchComputeTheWholeBatchsBatchNorm) {
  sync_equals_whole_batch("", {6, 3, 5, 4}, 2);
  sync_equals_whole_batch(", eps: 1e-3, momentum: 0.3", {4, 5}, 2);
  sync_equals_whole_batch("", {2, 4, 3, 7}, 2);  // one sample per rank
}

TEST(SyncBatchNorm, ThreeRanks) {
  sync_equals_whole_batch("", {6, 2, 3, 3}, 3);
}

// L = sum over ranks r of <c_r, y_r>, each rank's c_r its top gradient. The layer's dx on rank r
// must be dL/dx_r (the statistics couple the ranks) and the ranks' summed dgamma, dbeta dL/dgamma,
// dL/dbeta: checked by central differences in double, every input of every rank perturbed in turn
// (both ranks run every forward, so each difference sees the whole batch).
TEST(SyncBatchNorm, GradientOverTwoRanks) {
  const Shape shard{2, 3, 2, 3};
  const int ranks = 2;
  const double h = 1e-6, threshold = 1e-6;
  std::vector<std::vector<std::string>> failures(static_cast<size_t>(ranks));
  const auto errors = run_ranks(ranks, [&](int r, distributed::ProcessGroup& group) {
    Context ctx(Device::cpu(), 1, 1);
    LayerHarness bn("{name: bn, type: BatchNorm, sync: true}", {shard}, ctx, 1, Phase::train,
                    DType::f64);
    dynamic_cast<UsesCollective&>(*bn.layer).set_collective(&group);
    bn.set_bottom(0, channel_values(shard, 31 + uint64_t(r)));
    set_values(bn.layer->params()[0].value, random_values(3, 0.5f, 1.5f, 41));
    set_values(bn.layer->params()[1].value, random_values(3, -0.5f, 0.5f, 42));
    const std::vector<float> c = random_values(size_t(shape_numel(shard)), -1.0f, 1.0f, 51 + r);
    auto total_loss = [&] {
      bn.forward();
      Tensor loss(Shape{1}, DType::f64);
      loss.data<double>()[0] = 0.0;
      for (size_t i = 0; i < c.size(); ++i) {
        loss.data<double>()[0] += double(c[i]) * bn.top[0]->value.data<double>()[i];
      }
      group.all_reduce_sum(loss, nullptr);
      return loss.data<double>()[0];
    };
    auto check = [&](const std::string& what, double analytic, double numeric) {
      const double scale = std::max({1.0, std::fabs(analytic), std::fabs(numeric)});
      if (std::fabs(analytic - numeric) > threshold * scale) {
        failures[size_t(r)].push_back(what + ": analytic " + std::to_string(analytic) +
                                      ", numeric " + std::to_string(numeric));
      }
    };
    total_loss();
    set_values(bn.top[0]->grad, c);
    for (Param& p : bn.layer->params()) p.grad.fill(0.0f);
    bn.layer->backward(bn.top, {true}, bn.bottom, ctx);
    const Tensor dx = bn.bottom[0]->grad.clone();
    std::vector<Tensor> dparams;
    for (Param& p : bn.layer->params()) {
      dparams.push_back(p.grad.clone());
      group.all_reduce_sum(dparams.back(), nullptr);  // the sum of the ranks'
    }
    double* x = bn.bottom[0]->value.data<double>();
    for (int q = 0; q < ranks; ++q) {
      for (int64_t i = 0; i < shape_numel(shard); ++i) {
        const double kept = x[i];
        if (r == q) x[i] = kept + h;
        const double plus = total_loss();
        if (r == q) x[i] = kept - h;
        const double minus = total_loss();
        if (r == q) x[i] = kept;
        if (r == q) {
          check("dx[" + std::to_string(i) + "]", dx.data<double>()[i], (plus - minus) / (2 * h));
        }
      }
    }
    for (size_t k = 0; k < dparams.size(); ++k) {
      double* p = bn.layer->params()[k].value.data<double>();
      for (int64_t i = 0; i < 3; ++i) {
        const double kept = p[i];
        p[i] = kept + h;
        const double plus = total_loss();
        p[i] = kept - h;
        const double minus = total_loss();
        p[i] = kept;
        check(bn.layer->params()[k].name + "[" + std::to_string(i) + "]",
              dparams[k].data<double>()[i], (plus - minus) / (2 * h));
      }
    }
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(errors[size_t(r)], "");
    for (const std::string& f : failures[size_t(r)]) ADD_FAILURE() << "rank " << r << ": " << f;
  }
}

// A collective of one rank: nothing to add, and the layer must not ask.
class OneRank final : public Collective {
 public:
  int ranks() const override { return 1; }
  void all_reduce_sum(Tensor&, gpu::Stream) override { ADD_FAILURE() << "one rank all-reduced"; }
};

TEST(SyncBatchNorm, OneProcessIsBatchNormBitForBit) {
  const Shape shape{4, 3, 5, 2};
  OneRank one;
  for (Collective* collective :
       {static_cast<Collective*>(nullptr), static_cast<Collective*>(&one)}) {
    Context ctx;
    LayerHarness bn("{name: bn, type: BatchNorm}", {shape}, ctx);
    LayerHarness sync("{name: bn, type: BatchNorm, sync: true}", {shape}, ctx);
    dynamic_cast<UsesCollective&>(*sync.layer).set_collective(collective);
    for (uint64_t s = 0; s < 2; ++s) {
      const std::vector<float> x = channel_values(shape, 61 + s);
      const std::vector<float> dy = random_values(size_t(shape_numel(shape)), -1, 1, 71 + s);
      const StepValues a = step(bn, x, dy), b = step(sync, x, dy);
      EXPECT_EQ(a.y, b.y);
      EXPECT_EQ(a.dx, b.dx);
      EXPECT_EQ(a.dgamma, b.dgamma);
      EXPECT_EQ(a.dbeta, b.dbeta);
      EXPECT_EQ(a.running_mean, b.running_mean);
      EXPECT_EQ(a.running_var, b.running_var);
      EXPECT_EQ(a.batches, b.batches);
    }
    // Checkpoints are interchangeable: the same names and shapes.
    ASSERT_EQ(bn.layer->params().size(), sync.layer->params().size());
    for (size_t k = 0; k < bn.layer->params().size(); ++k) {
      EXPECT_EQ(bn.layer->params()[k].name, sync.layer->params()[k].name);
    }
    ASSERT_EQ(bn.layer->buffers().size(), sync.layer->buffers().size());
    for (size_t k = 0; k < bn.layer->buffers().size(); ++k) {
      EXPECT_EQ(bn.layer->buffers()[k].name, sync.layer->buffers()[k].name);
      EXPECT_EQ(bn.layer->buffers()[k].value.shape(), sync.layer->buffers()[k].value.shape());
    }
  }
}

TEST(SyncBatchNorm, PerActivationModeIsRefusedNamingTheKey) {
  Context ctx;
  const std::string e = testing::error_of([&] {
    LayerHarness h("{name: bn1, type: BatchNorm, sync: true, mode: per_activation}", {{4, 3}}, ctx);
  });
  EXPECT_CONTAINS(e, "bn1");
  EXPECT_CONTAINS(e, "sync");
  EXPECT_CONTAINS(e, "per_activation");
}

}  // namespace
}  // namespace crema
