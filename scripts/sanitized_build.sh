# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: the one sanitized build tree both use.
# clang-14, CPU only, everything compiled with AddressSanitizer and UndefinedBehaviorSanitizer at
# -O1 with line tables (stack traces name file:line; the full -g and -O2 cost build time), and with
# CREMA_FUZZ=ON, so the same objects serve the test suite and the libFuzzer targets
# (-fsanitize=fuzzer-no-link on crema_core and crema_data only adds coverage counters, which
# ordinary executables link against the sanitizer runtime's defaults). -Wno-pass-failed: clang
# notes every `omp simd` loop it cannot vectorize at -O1.
#
# UBSan stays recoverable and halt_on_error=1 stops at the first report instead: a check compiled
# as non-recoverable aborts before its suppression is consulted, and tests/fuzz/ubsan.supp must be
# able to set the listed third-party reports aside. ASan also looks for leaks, for locals used after
# their function returned and for globals read before their initialization.

sanitized_build="${SANITIZE_BUILD_DIR:-build-asan}"
# What it needs beyond scripts/setup.sh's packages: clang with its sanitizer and libFuzzer
# runtimes, clang's OpenMP, and Ninja.
sanitized_packages=(clang-14 libclang-rt-14-dev libomp-14-dev ninja-build)
ubsan_suppressions="$PWD/tests/fuzz/ubsan.supp"
asan_options="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1"
ubsan_options="halt_on_error=1:print_stacktrace=1:suppressions=$ubsan_suppressions"
export ASAN_OPTIONS="${ASAN_OPTIONS:-$asan_options:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-$ubsan_options}"

# Configures $sanitized_build (only on the first call: reconfiguring with other flags would
# rebuild everything). Uses ccache where installed.
configure_sanitized_build() {
  [ -f "$sanitized_build/build.ninja" ] && return
  local flags="-fsanitize=address,undefined -fno-omit-frame-pointer -Wno-pass-failed"
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$sanitized_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCREMA_CUDA=OFF -DCREMA_FUZZ=ON "${launcher[@]}" >/dev/null
}
