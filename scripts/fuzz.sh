#!/usr/bin/env bash
# Fuzz every parser of a user's file (tests/fuzz/README.md): installs clang-14 where missing,
# configures build-asan/ (scripts/sanitized_build.sh: clang, ASan and UBSan, CREMA_FUZZ=ON; the
# tree scripts/sanitize.sh uses too), builds the targets and runs each for a while on one core,
# starting from its seed corpus, with the memory and time limits below; prints executions and the
# result per target. CI runs `scripts/fuzz.sh 30` (.ci/run).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET | -runs=N] [TARGET...]     (default: 60 seconds, all)
#   scripts/fuzz.sh 600 idx cifar
#
# New inputs the fuzzer keeps go to build-asan/corpus/<target>/ (the seeds in the tree stay as
# they are); a crashing input is saved as build-asan/artifacts/<target>-crash-<hash>, and the
# target's log as build-asan/logs/<target>.log. Exits 1 when any target failed.
set -euo pipefail
cd "$(dirname "$0")/.."

budget="${1:-60}"
shift || true
case "$budget" in
  -runs=*) limit=("$budget") ;;
  *[!0-9]* | "") echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET | -runs=N] [TARGET...]" >&2; exit 2 ;;
  *) limit=("-max_total_time=$budget") ;;
esac

source scripts/sanitized_build.sh
scripts/setup.sh --packages-only "${sanitized_packages[@]}"
configure_sanitized_build
build="$sanitized_build"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for source in tests/fuzz/*_fuzz.cpp; do
    name="$(basename "$source" _fuzz.cpp)"
    targets+=("$name")
  done
fi
cmake --build "$build" -j"${JOBS:-1}" --target "${targets[@]/#/crema_fuzz_}"

mkdir -p "$build/artifacts" "$build/logs"
failed=0
printf '%-18s %12s %8s  %s\n' target executions seconds result
for name in "${targets[@]}"; do
  corpus="$build/corpus/$name"
  mkdir -p "$corpus"
  log="$build/logs/$name.log"
  start=$SECONDS
  status=0
  "$build/bin/crema_fuzz_$name" "${limit[@]}" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$build/artifacts/$name-" "$corpus" "tests/fuzz/corpus/$name" >"$log" 2>&1 ||
    status=$?
  runs="$(grep -oE '^Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' || true)"
  if [ "$status" -eq 0 ]; then
    result="ok"
  else
    failed=1
    result="FAILED (exit $status): $(grep -m1 -E 'ERROR:|runtime error|Test unit written' "$log" || echo "see $log")"
    runs="$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)"
  fi
  printf '%-18s %12s %8s  %s\n' "$name" "${runs:-?}" "$((SECONDS - start))" "$result"
done
exit "$failed"
