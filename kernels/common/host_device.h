// CREMA_HOST_DEVICE marks a function that CUDA kernels and host code share (a counter-based hash,
// an optimizer's update rule): __host__ __device__ under nvcc, nothing under the host compiler.
#pragma once

#ifdef __CUDACC__
#define CREMA_HOST_DEVICE __host__ __device__
#else
#define CREMA_HOST_DEVICE
#endif
