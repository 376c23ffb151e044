// Shared by the CPU and CUDA GEMM tests: one case of C = alpha op(A) op(B) + beta C.
#pragma once

#include <cstdint>
#include <string>

namespace crema::kernels::testing {

struct Case {
  bool trans_a, trans_b;
  int64_t M, N, K;
  int64_t pad;  // extra elements in every leading dimension
  float alpha, beta;
};

inline std::string describe(const Case& c) {
  return std::string(c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N") +
         " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " pad=" + std::to_string(c.pad) + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta);
}

}  // namespace crema::kernels::testing
