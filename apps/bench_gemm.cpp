// crema bench gemm: every rung of the CUDA GEMM ladder (kernels/gemm/ladder/gemm_ladder.h:
// production's versions and the ladder's) that computes in --math, on
// each shape: checked against double-precision dot products, then timed over input copies
// rotated past L2.
//
// The check: shapes up to kFullCheckMacs multiply-adds compare all of C with ref::gemm in double
// ("ref"); larger ones compare kSamples elements of C, each a dot product in double on the host
// ("sampled2048"), and scan all of C for NaN (the output is poisoned first, so an element a
// kernel never wrote fails).
//
// With --math bf16, every shape gets more rows on the same operands stored as bf16 (what cuBLAS's
// bf16 GEMM reads) and as f16, checked against the same fp32-operand reference: "gemm_bf16"
// (cuda::gemm_bf16, C f32), "gemm_16bit" (cuda::gemm_16bit as the Tensor-level gemm runs it on
// bf16 tensors, C f32: a split of K for few tiles and a long K), "gemm_16bit_c16" (the same with
// a bf16 C, what an inner product's forward and input gradient write), and "gemm_f16",
// "gemm_f16_c16" (f16 operands, C f32 or f16). Those rows run best_16bit_version
// (wgmma_in_place on sm_90, which reads MN-major operands in place); on sm_90, rows "t5_16bit",
// "t5_16bit_c16", "t5_f16", "t5_f16_c16" run wgmma_repacked (t5's copies) beside them.
// --version wgmma_in_place runs only its 16-bit rows (it reads no fp32 operands); --version
// wgmma_repacked (or another rung gemm_16bit runs: t1, t2) runs that rung's rows and its 16-bit
// rows alone.
//
// A version that wants a workspace (t5 repacks operands into one; cuda::ladder::sgemm_workspace,
// cuda::gemm_bf16_workspace) gets it from ctx.workspace(), and its time includes the repacking.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>

#include "apps/bench.h"
#include "core/error.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ladder/gemm_ladder.h"

namespace crema::bench {
namespace {

namespace cuda = kernels::cuda;
namespace ladder = kernels::cuda::ladder;
using ladder::Rung;

constexpr double kFullCheckMacs = 1 << 26;
constexpr int kSamples = 2048;

double tolerance(cuda::GemmMath math) {
  switch (math) {
    case cuda::GemmMath::tf32:
      return 2e-3;
    case cuda::GemmMath::bf16:
      return 1e-2;
    case cuda::GemmMath::fp32:
      break;
  }
  return 1e-4;
}

// The gemm_16bit versions to run with --math bf16: --version's when gemm_16bit runs it, else the
// best, and on sm_90 t5's way beside it.
std::vector<cuda::GemmVersion> versions_16bit(const Options& options) {
  using V = cuda::GemmVersion;
  for (V v : {V::wgmma_in_place, V::wgmma_repacked, V::bf16_mma, V::tf32_mma}) {
    if (options.version == cuda::gemm_version_name(v)) return {v};
  }
  const V best = cuda::best_16bit_version(DType::bf16);
  if (options.version.empty() && best == V::wgmma_in_place) return {best, V::wgmma_repacked};
  return {best};
}

// A 16-bit row's label: "gemm" for best_16bit_version, else the rung's label ("t5"), then the
// operands ("16bit": bf16, "f16") and "_c16" for a 16-bit C.
std::string label_16bit(cuda::GemmVersion version, DType operands, DType c_type) {
  std::string prefix = "gemm";
  if (version != cuda::best_16bit_version(DType::bf16)) {
    for (Rung r : ladder::rungs()) {
      if (ladder::production_version(r) == version) prefix = ladder::label(r);
    }
  }
  return prefix + (operands == DType::bf16 ? "_16bit" : "_f16") +
         (c_type == DType::f32 ? "" : "_c16");
}

std::vector<Rung> versions_to_run(const Options& options, cuda::GemmMath math) {
  if (options.version == cuda::gemm_version_name(cuda::GemmVersion::wgmma_in_place)) {
    if (math != cuda::GemmMath::bf16) {
      throw Error("--version wgmma_in_place reads 16-bit operands: run it with --math bf16");
    }
    return {};  // its 16-bit rows alone
  }
  if (options.version.empty()) {
    std::vector<Rung> versions;
    for (Rung v : ladder::rungs()) {
      if (ladder::supports(v, math)) versions.push_back(v);
    }
    return versions;
  }
  const std::optional<Rung> v = ladder::from_name(options.version);
  if (!v) {
    std::string names;
    for (Rung known : ladder::rungs()) {
      names += std::string(names.empty() ? "" : ", ") + ladder::name(known);
    }
    throw Error("--version '" + options.version + "': no such GEMM version (" + names + ")");
  }
  if (!ladder::supports(*v, math)) {
    throw Error("--version " + options.version + " does not compute in " + options.math);
  }
  return {*v};
}

// The operands of one shape on the host (the check's inputs) and their rotated device copies.
struct Operands {
  GemmShape s;
  int64_t lda, ldb;
  std::vector<float> a, b;
  std::vector<Tensor> dev_a, dev_b, dev_c;

  Operands(Context& ctx, const GemmShape& shape, Random& random)
      : s(shape), lda(shape.trans_a ? shape.M : shape.K), ldb(shape.trans_b ? shape.K : shape.N) {
    a.resize(size_t(s.M * s.K));
    b.resize(size_t(s.K * s.N));
    for (float& v : a) v = float(random.uniform(-1.0, 1.0));
    for (float& v : b) v = float(random.uniform(-1.0, 1.0));
    const Tensor host_a = Tensor::from_vector({s.M * s.K}, a);
    const Tensor host_b = Tensor::from_vector({s.K * s.N}, b);
    const int copies = rotation_copies(size_t(s.M * s.K + s.K * s.N + s.M * s.N) * sizeof(float));
    for (int i = 0; i < copies; ++i) {
      dev_a.push_back(ctx.empty({s.M * s.K}));
      dev_b.push_back(ctx.empty({s.K * s.N}));
      dev_c.push_back(ctx.empty({s.M * s.N}));
      dev_a.back().copy_from(host_a);
      dev_b.back().copy_from(host_b);
    }
  }

  double a_at(int64_t i, int64_t k) const {
    return a[size_t(s.trans_a ? k * lda + i : i * lda + k)];
  }
  double b_at(int64_t k, int64_t j) const {
    return b[size_t(s.trans_b ? j * ldb + k : k * ldb + j)];
  }

  void launch(int copy, Rung version, cuda::GemmMath math, float* workspace, gpu::Stream stream) {
    const size_t i = size_t(copy) % dev_a.size();
    ladder::sgemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, dev_a[i].data<float>(), lda,
                  dev_b[i].data<float>(), ldb, 0.0f, dev_c[i].data<float>(), s.N, stream, version,
                  math, workspace);
  }
};

// The operands of `op` rounded to bf16 or f16 (nearest even) and stored so, rotated like op's.
struct Bf16Operands {
  DType type;
  std::vector<Tensor> dev_a, dev_b;

  Bf16Operands(Context& ctx, const Operands& op, DType t = DType::bf16) : type(t) {
    const Tensor host_a = pack(op.a, t), host_b = pack(op.b, t);
    for (size_t i = 0; i < op.dev_a.size(); ++i) {
      dev_a.push_back(ctx.empty(host_a.shape()));
      dev_b.push_back(ctx.empty(host_b.shape()));
      dev_a.back().copy_from(host_a);
      dev_b.back().copy_from(host_b);
    }
  }

  // bf16 or f16 bit patterns (nearest even), two to a float of the returned host tensor.
  static Tensor pack(const std::vector<float>& values, DType t) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      bits[i] = t == DType::bf16 ? f32_to_bf16_bits(values[i]) : f32_to_f16_bits(values[i]);
    }
    std::vector<float> packed((bits.size() + 1) / 2, 0.0f);
    std::memcpy(packed.data(), bits.data(), bits.size() * sizeof(uint16_t));
    return Tensor::from_vector({int64_t(packed.size())}, packed);
  }

  void launch(int copy, Operands& op, float* workspace, gpu::Stream stream) const {
    const size_t i = size_t(copy) % dev_a.size();
    const GemmShape& s = op.s;
    cuda::gemm_bf16(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f,
                    reinterpret_cast<const uint16_t*>(dev_a[i].data<float>()), op.lda,
                    reinterpret_cast<const uint16_t*>(dev_b[i].data<float>()), op.ldb, 0.0f,
                    op.dev_c[i].data<float>(), s.N, stream, workspace);
  }
  // cuda::gemm_16bit into c (f32 or the operands' type, M x N).
  void launch_16bit(int copy, const Operands& op, Tensor& c, cuda::GemmVersion version,
                    float* workspace, gpu::Stream stream) const {
    const size_t i = size_t(copy) % dev_a.size();
    const GemmShape& s = op.s;
    cuda::gemm_16bit(type, c.dtype(), s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, dev_a[i].raw(),
                     op.lda, dev_b[i].raw(), op.ldb, 0.0f, c.raw(), s.N, nullptr, stream, version,
                     workspace);
  }
};

// What C should be where the check looks: all of it in double, or kSamples sampled elements.
struct Reference {
  std::string kind;
  std::vector<int64_t> where;  // indices into C (empty: all)
  std::vector<double> values;
};

Reference reference(const Operands& op, Random& random) {
  const GemmShape& s = op.s;
  Reference ref;
  if (double(s.M) * double(s.N) * double(s.K) <= kFullCheckMacs) {
    ref.kind = "ref";
    std::vector<double> a(op.a.begin(), op.a.end()), b(op.b.begin(), op.b.end());
    ref.values.resize(size_t(s.M * s.N));
    kernels::ref::gemm<double>(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0, a.data(), op.lda, b.data(),
                               op.ldb, 0.0, ref.values.data(), s.N);
    return ref;
  }
  ref.kind = "sampled" + std::to_string(kSamples);
  for (int t = 0; t < kSamples; ++t) {
    const int64_t i = int64_t(random.below(uint64_t(s.M))),
                  j = int64_t(random.below(uint64_t(s.N)));
    double sum = 0;
    for (int64_t k = 0; k < s.K; ++k) sum += op.a_at(i, k) * op.b_at(k, j);
    ref.where.push_back(i * s.N + j);
    ref.values.push_back(sum);
  }
  return ref;
}

// C poisoned with NaN before a checked call (ctx.fill takes f32 device tensors only; a 16-bit C is
// filled on the host and copied).
void poison(Context& ctx, Tensor& c) {
  if (c.dtype() == DType::f32) return ctx.fill(c, NAN);
  Tensor host(c.shape(), c.dtype());
  host.fill(NAN);
  c.copy_from(host);
}

double check(const std::vector<float>& c, const Reference& ref) {
  if (std::any_of(c.begin(), c.end(), [](float v) { return std::isnan(v); })) return NAN;
  if (ref.where.empty()) return relative_error(c.data(), ref.values.data(), c.size());
  std::vector<float> picked;
  for (int64_t index : ref.where) picked.push_back(c[size_t(index)]);
  return relative_error(picked.data(), ref.values.data(), picked.size());
}

}  // namespace

int bench_gemm(Context& ctx, const Options& options, std::ostream& out) {
  const std::optional<cuda::GemmMath> math = cuda::gemm_math_from_name(options.math);
  if (!math) throw Error("--math: expected fp32, tf32 or bf16, got '" + options.math + "'");
  const std::vector<Rung> versions = versions_to_run(options, *math);
  std::vector<GemmShape> shapes;
  for (const std::string& text : options.shapes) {
    for (const GemmShape& shape : parse_gemm_shapes(text)) shapes.push_back(shape);
  }
  if (shapes.empty()) shapes = default_gemm_shapes();

  Table table(out, device_peak(ctx));
  Random random(1);
  for (const GemmShape& shape : shapes) {
    Operands op(ctx, shape, random);
    const Reference ref = reference(op, random);
    for (Rung version : versions) {
      const size_t floats = ladder::sgemm_workspace(shape.trans_a, shape.trans_b, shape.M, shape.N,
                                                    shape.K, version, *math);
      float* workspace = floats > 0 ? ctx.workspace(floats) : nullptr;
      Row row;
      row.shape = shape.str();
      row.version = ladder::name(version);
      row.check = ref.kind;
      row.tolerance = tolerance(*math);
      row.flops = 2.0 * double(shape.M) * double(shape.N) * double(shape.K);
      row.bytes = double(shape.M * shape.K + shape.K * shape.N + shape.M * shape.N) * sizeof(float);
      row.peak = options.math;
      row.workspace_bytes = double(floats) * sizeof(float);
      ctx.fill(op.dev_c[0], NAN);
      op.launch(0, version, *math, workspace, ctx.stream());
      ctx.synchronize();
      row.rel_error = check(op.dev_c[0].to_vector(), ref);
      if (row.rel_error <= row.tolerance) {
        row.ms = measure_ms(ctx, options, [&](int call) {
          op.launch(call, version, *math, workspace, ctx.stream());
        });
      }
      table.print(row);
    }
    if (*math == cuda::GemmMath::bf16 && !versions.empty()) {
      const Bf16Operands bf16(ctx, op);
      const size_t floats =
          cuda::gemm_bf16_workspace(shape.trans_a, shape.trans_b, shape.M, shape.N, shape.K);
      float* workspace = floats > 0 ? ctx.workspace(floats) : nullptr;
      Row row;
      row.shape = shape.str();
      row.version = "gemm_bf16";
      row.check = ref.kind;
      row.tolerance = tolerance(*math);
      row.flops = 2.0 * double(shape.M) * double(shape.N) * double(shape.K);
      row.bytes = double(shape.M * shape.K + shape.K * shape.N) * 2 + double(shape.M * shape.N) * 4;
      row.peak = options.math;
      row.workspace_bytes = double(floats) * sizeof(float);
      ctx.fill(op.dev_c[0], NAN);
      bf16.launch(0, op, workspace, ctx.stream());
      ctx.synchronize();
      row.rel_error = check(op.dev_c[0].to_vector(), ref);
      if (row.rel_error <= row.tolerance) {
        row.ms = measure_ms(ctx, options,
                            [&](int call) { bf16.launch(call, op, workspace, ctx.stream()); });
      }
      table.print(row);
    }
    if (*math == cuda::GemmMath::bf16) {
      // cuda::gemm_16bit as the Tensor level runs it, on bf16 and f16 operands, into an f32 C and
      // into a 16-bit C (one C for every call: its writes are not what the rotation is for).
      for (DType type : {DType::bf16, DType::f16}) {
        const Bf16Operands ops(ctx, op, type);
        for (cuda::GemmVersion version : versions_16bit(options)) {
          if (version == cuda::GemmVersion::bf16_mma && type != DType::bf16) continue;
          const size_t floats16 = cuda::gemm_16bit_workspace(shape.trans_a, shape.trans_b, shape.M,
                                                             shape.N, shape.K, version);
          float* workspace16 = floats16 > 0 ? ctx.workspace(floats16) : nullptr;
          for (DType c_type : {DType::f32, type}) {
            Tensor c = ctx.empty({shape.M * shape.N}, c_type);
            Row row;
            row.shape = shape.str();
            row.version = label_16bit(version, type, c_type);
            row.check = ref.kind;
            row.tolerance = tolerance(*math);
            row.flops = 2.0 * double(shape.M) * double(shape.N) * double(shape.K);
            row.bytes = double(shape.M * shape.K + shape.K * shape.N) * 2 +
                        double(shape.M * shape.N) * double(dtype_size(c_type));
            row.peak = options.math;
            row.workspace_bytes = double(floats16) * sizeof(float);
            poison(ctx, c);
            ops.launch_16bit(0, op, c, version, workspace16, ctx.stream());
            ctx.synchronize();
            row.rel_error = check(c.to_vector(), ref);
            if (row.rel_error <= row.tolerance) {
              row.ms = measure_ms(ctx, options, [&](int call) {
                ops.launch_16bit(call, op, c, version, workspace16, ctx.stream());
              });
            }
            table.print(row);
          }
        }
      }
    }
  }
  return table.status();
}

}  // namespace crema::bench
