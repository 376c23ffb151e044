#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer
# (tests/README.md, "Sanitizers"): installs clang-14 where missing, configures build-asan/
# (scripts/sanitized_build.sh: the tree scripts/fuzz.sh uses too), builds crema and crema_tests
# and runs every CPU test through ctest, the Python ones (which run the sanitized crema) included.
#
#   scripts/sanitize.sh [CTEST_ARGS...]      e.g. scripts/sanitize.sh -R Safetensors
#
# A report fails its test (ASan, leaks included, and UBSan end the process with exit code 1), and
# each one is also written to build-asan/sanitizer-logs/, so that a report inside a crema process
# a test runs and expects to fail still counts. Exits 1 when a test failed or any report was
# written.
#
# Two tests are left out, both whole nets through the CPU GEMM, which -O1 and ASan slow most:
# Configs.EveryConfigRunsAFewSteps trains every config in configs/ (ResNet and VGG-BN included) for
# 4 steps and evaluates each on its whole test set: 35 s in the Release suite, still on ResNet
# after 10 minutes under the sanitizers (-O1, on 2 busy cores); Zoo.LogitsMatchTorchvision runs
# torchvision's 13 ImageNet nets at 224 x 224 (and fine-tunes ResNet-18): 2 minutes in Release, not
# done after 3 minutes here. The layers, nets, loop and weight readers they run have tests of their
# own here (PytorchLoad.PthWeights reads .pth files through the sanitized crema).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/sanitized_build.sh
scripts/setup.sh --packages-only "${sanitized_packages[@]}"
configure_sanitized_build
# The example programs too: Package.InstalledExamplesMatchTheTree compares the installed
# package's builds of them with these.
cmake --build "$sanitized_build" -j"${JOBS:-$(nproc)}" --target crema crema_tests \
  crema_example_conv crema_example_classify

logs="$PWD/$sanitized_build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$logs/asan"
export UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$logs/ubsan"
# The tests' scratch folders (testing::fresh_dir) go under the build tree, apart from those of
# another suite running beside this one.
export TEST_TMPDIR="$PWD/$sanitized_build/test-tmp"
rm -rf "$TEST_TMPDIR"
mkdir -p "$TEST_TMPDIR"
status=0
ctest --test-dir "$sanitized_build" -L cpu -E '^(Configs\.EveryConfigRunsAFewSteps|Zoo\.LogitsMatchTorchvision)$' \
  --output-on-failure -j"$(nproc)" "$@" || status=1

reports=("$logs"/*)
if [ -e "${reports[0]}" ]; then
  echo "sanitize: ${#reports[@]} sanitizer report(s):"
  for report in "${reports[@]}"; do
    echo "== $report"
    cat "$report"
  done
  status=1
fi
exit "$status"
