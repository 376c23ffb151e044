// GPU tests: skip cleanly where no CUDA device is present (CI, CPU-only builds).
#pragma once

#include <gtest/gtest.h>

#include "core/cuda_runtime.h"

#define CREMA_REQUIRE_CUDA()                                                    \
  do {                                                                          \
    if (::crema::gpu::device_count() == 0) GTEST_SKIP() << "no CUDA GPU here";  \
  } while (0)
