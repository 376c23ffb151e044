#!/usr/bin/env bash
# The installed package, end to end (issue: crema as a library): installs the build tree BUILD into
# a fresh prefix, configures and builds tests/package (a project outside the tree) against it with
# find_package(crema), runs its two example programs, and compares what they print with the same
# programs built in the tree (BUILD/bin/crema_example_*). Run by ctest as
# Package.InstalledExamplesMatchTheTree.
#
#   tests/package/package_test.sh BUILD WORK
set -euo pipefail
build=$(realpath "$1")
work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
# The package's headers must not pull in CUDA's or Eigen's.
if grep -rlE '#include <(cuda|Eigen)' "$work/prefix/include"; then
  echo "installed headers include CUDA or Eigen headers (listed above)" >&2
  exit 1
fi
# The outside project compiles and links as BUILD did (a sanitized build's libraries need the
# same compiler and -fsanitize flags).
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
options=(-DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER="$(cached CMAKE_CXX_COMPILER)"
         -DCMAKE_CXX_FLAGS="$(cached CMAKE_CXX_FLAGS)" -DCMAKE_BUILD_TYPE="$(cached CMAKE_BUILD_TYPE)"
         -DCMAKE_EXE_LINKER_FLAGS="$(cached CMAKE_EXE_LINKER_FLAGS)")
[ -n "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] &&
  options+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CMAKE_CXX_COMPILER_LAUNCHER")
cmake -S "$here" -B "$work/build" "${options[@]}" > "$work/configure.log"
cmake --build "$work/build" -j "${JOBS:-2}" > "$work/build.log"
python3 "$here/make_inputs.py" "$work/inputs"
cd "$work/inputs"
run_both() {  # name, arguments...
  local name=$1 tree=$2 package=$3
  shift 3
  "$build/bin/$tree" "$@" > "$work/$name.tree.txt"
  "$work/build/$package" "$@" > "$work/$name.package.txt"
  diff "$work/$name.tree.txt" "$work/$name.package.txt"
  cat "$work/$name.package.txt"
}
run_both conv crema_example_conv conv_sample
run_both classify crema_example_classify classify "$here/tiny_net.yaml" tiny_net.safetensors \
  image0.pgm image1.pgm
echo "package test: ok"
