#!/usr/bin/env bash
# Runs crema's libFuzzer targets in libFuzzer's fork mode, all at once, on many cores:
#   ALLOC="idx:2 pth:3 ..." SECONDS_EACH=530 [FUZZ_BIN=build-asan/bin] scripts/fuzz_fork.sh
# (workers per target; SECONDS_EACH of wall time each, all targets at once), from the committed
# seeds; logs and any crashing input under $OUT/fuzz (default build-asan/fork). The binaries come
# from scripts/fuzz.sh (build-asan/); on a GPU host they travel bundled (tests/fuzz/README.md).
# Prints, per target, the executions summed over its workers (fork mode's last "#N" line) and
# its counts of OOMs, timeouts and crashes; exits 1 when any target stopped on one.
# On the GPU host (no compiler there): LD_LIBRARY_PATH=.gpu/lib FUZZ_BIN=.gpu/fuzz after
# `gpu-bundle .gpu build-asan/bin/crema_fuzz_*` with the binaries moved to .gpu/fuzz.
set -u
OUT=${OUT:-build-asan/fork}; FUZZ_BIN=${FUZZ_BIN:-build-asan/bin}; mkdir -p $OUT/fuzz
export UBSAN_OPTIONS=suppressions=$PWD/tests/fuzz/ubsan.supp:print_stacktrace=1:halt_on_error=1
for spec in $ALLOC; do
  name=${spec%%:*}; workers=${spec##*:}
  mkdir -p $OUT/corpus/$name
  ( timeout $((SECONDS_EACH + 60)) $FUZZ_BIN/crema_fuzz_$name -fork=$workers -max_total_time=$SECONDS_EACH \
      -rss_limit_mb=2048 -timeout=10 -artifact_prefix=$OUT/fuzz/$name- $OUT/corpus/$name tests/fuzz/corpus/$name \
      > $OUT/fuzz/$name.log 2>&1; echo "exit=$?" >> $OUT/fuzz/$name.log ) &
done
wait
for spec in $ALLOC; do
  name=${spec%%:*}; workers=${spec##*:}; log=$OUT/fuzz/$name.log
  printf '%-18s workers %2s  %s  %s  %s\n' $name $workers "$(grep -oE '^#[0-9]+' $log | tail -1)" \
    "$(grep -oE 'oom/timeout/crash: [0-9/]+' $log | tail -1)" "$(grep -E '^exit=' $log)"
done | tee $OUT/fuzz/summary.txt
! grep -qvE 'oom/timeout/crash: 0/0/0  exit=0$' $OUT/fuzz/summary.txt
