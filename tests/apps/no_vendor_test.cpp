// crema's primitives are its own: neither the library nor the `crema` command may link cuDNN or
// cuBLAS, dynamically (ldd) or statically (symbols).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace crema {
namespace {

std::string run(const std::string& command) {
  std::string output;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return output;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), int(buffer.size()), pipe.get()) != nullptr) output += buffer.data();
  return output;
}

TEST(NoVendorPrimitives, CremaLinksNeitherCudnnNorCublas) {
  const std::string binary = std::string(CREMA_BINARY_DIR) + "/bin/crema";
  const std::string libraries = run("ldd " + binary + " 2>&1");
  ASSERT_NE(libraries.find("lib"), std::string::npos) << "ldd printed nothing useful: " << libraries;
  EXPECT_EQ(libraries.find("cudnn"), std::string::npos) << libraries;
  EXPECT_EQ(libraries.find("cublas"), std::string::npos) << libraries;
  const std::string symbols = run("nm -C " + binary + " 2>&1 | grep -ci -E 'cudnn|cublas'");
  EXPECT_EQ(symbols, "0\n") << "cuDNN/cuBLAS symbols in " << binary;
  // The test itself must be able to see a symbol: crema's own GEMM is there.
  EXPECT_NE(run("nm -C " + binary + " | grep -c 'crema::kernels::cpu::sgemm'"), "0\n");
}

}  // namespace
}  // namespace crema
