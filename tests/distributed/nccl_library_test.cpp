// NCCL is loaded at run time; where it is missing, the error says what was tried and how to
// point crema at it. (The collectives themselves are tested on two GPUs: ddp_cuda_test.cpp.)
#include <gtest/gtest.h>

#include "apps/distributed/nccl_library.h"
#include "tests/apps/app_test_util.h"
#include "tests/support/error_text.h"

namespace crema::distributed {
namespace {

TEST(NcclLibrary, AMissingLibraryIsOneLineNamingWhatWasTried) {
  testing::ScopedEnv env("CREMA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  const std::string e = testing::error_of([] { nccl_library(); });
  EXPECT_CONTAINS(e,
                  "training on several GPUs needs NCCL, which could not be loaded: tried "
                  "/nonexistent/libnccl.so.2 (");
  EXPECT_CONTAINS(e, "set CREMA_NCCL_LIBRARY to the path of libnccl.so.2");
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(NcclLibrary, ALibraryWithoutNcclsFunctionsIsRefused) {
  testing::ScopedEnv env("CREMA_NCCL_LIBRARY", "libz.so.1");
  EXPECT_CONTAINS(testing::error_of([] { nccl_library(); }),
                  "libz.so.1 is not an NCCL 2 library: it has no ncclGetVersion");
}

}  // namespace
}  // namespace crema::distributed
