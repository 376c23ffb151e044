// The launches of the wgmma convolutions' kernel (convolution_tc_wgmma.cuh): clusters, how
// many of them a device holds at once, and the launch itself. Host code over the sm_90a kernels;
// included by the sm_90a files that launch them (convolution_tc_wgmma_sm90a.cu,
// convolution_tc_wgmma_filter_sm90a.cu).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/convolution/convolution_tc_wgmma.cuh"

namespace crema::kernels::cuda::tc::wg {

// The launch of `blocks` blocks of the kernel (`bytes` of shared memory, `threads` threads each)
// in clusters of `cluster` consecutive blocks, for cudaLaunchKernelEx and
// cudaOccupancyMaxActiveClusters.
struct ClusterLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attribute[1]{};
  ClusterLaunch(int64_t blocks, int bytes, gpu::Stream stream, int cluster,
                int threads = kBlockThreads) {
    config.gridDim = dim3(unsigned(blocks)), config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = size_t(bytes), config.stream = stream;
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = unsigned(cluster);
    attribute[0].val.clusterDim.y = attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute, config.numAttrs = 1;  // points into this object: not copied
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// How many clusters of `cluster` blocks of `kernel` (`bytes` of shared memory and `threads`
// threads a block, its shared-memory limit set) the current device holds at once
// (cudaOccupancyMaxActiveClusters: a GPC's SMs hold whole clusters); -1 where the driver does
// not answer (the error cleared).
template <class Kernel>
int active_clusters(Kernel kernel, int bytes, int threads, int cluster) {
  const ClusterLaunch launch(int64_t(cluster) * 64, bytes, nullptr, cluster, threads);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch.config) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return clusters;
}

// The same for wgmma_kernel a block a unit, asked once a device and size (an H200's 132 SMs at
// two blocks each hold 62 clusters of 4, not 66); where the driver does not answer, every
// cluster is taken to fit.
template <class E, int BN, class Problem>
int max_active_clusters(int cluster, const char* what) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, int> known;  // (device, cluster) -> clusters
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    throw DeviceError(std::string(what) + ": cannot read the current device");
  }
  const std::lock_guard<std::mutex> lock(mutex);
  const auto at = known.find({device, cluster});
  if (at != known.end()) return at->second;
  const auto kernel = wgmma_kernel<E, BN, Problem, 0>;
  constexpr int kBytes = Ring<BN, 0>::SMEM_BYTES;
  detail::set_shared_memory_limit(kernel, kBytes, what);
  int clusters = active_clusters(kernel, kBytes, kBlockThreads, cluster);
  if (clusters < 0) clusters = std::numeric_limits<int>::max();
  known[{device, cluster}] = clusters;
  return clusters;
}

// `blocks` blocks: every unit's (RESIDENT 0) or fewer, each walking units blockIdx.x,
// + gridDim.x, ...; `cluster` > 0: in clusters of that many consecutive blocks (blocks a
// multiple of it), whose shared memory the Problem's epilogue may read (the filter gradient's
// reduction).
template <class E, int BN, class Problem, int RESIDENT = 0>
void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const Problem& problem,
            int64_t blocks, gpu::Stream stream, const char* what, int cluster = 0) {
  const auto kernel = wgmma_kernel<E, BN, Problem, RESIDENT>;
  constexpr int kBytes = Ring<BN, RESIDENT>::SMEM_BYTES;
  detail::set_shared_memory_limit(kernel, kBytes, what);
  if (cluster == 0) {
    kernel<<<unsigned(blocks), kBlockThreads, kBytes, stream>>>(map_a, map_b, problem);
  } else {
    const ClusterLaunch launch(blocks, kBytes, stream, cluster);
    const cudaError_t e = cudaLaunchKernelEx(&launch.config, kernel, map_a, map_b, problem);
    if (e != cudaSuccess) {
      throw DeviceError(std::string("CUDA kernel ") + what + " failed to launch in clusters of " +
                        std::to_string(cluster) + ": " + cudaGetErrorString(e));
    }
  }
  gpu::check_launch(what);
}

}  // namespace crema::kernels::cuda::tc::wg
