#!/usr/bin/env bash
# The GPU suite plainly, then under compute-sanitizer memcheck, initcheck, synccheck (whole suite,
# in parallel, each in its own TEST_TMPDIR) and racecheck (per test suite, RACE_JOBS at once, each
# bounded by RACE_LIMIT s). Logs go to $OUT/logs.tar.gz; the summary to stdout and $OUT/summary.txt.
# Run on the GPU host from the tree with the bundle in .gpu/ (tests/README.md, "Sanitizers"):
#   RACE_LIMIT=330 RACE_JOBS=10 CREMA_SOURCE_DIR=$PWD bash scripts/gpu_sanitize.sh
# A racecheck run stopped by its limit shows rc=124: tests/README.md lists the tests it leaves out
# and how they were checked one by one.
set -u
OUT=${OUT:-/tmp/out}; L=$(mktemp -d); mkdir -p $OUT
export LD_LIBRARY_PATH=$PWD/.gpu/lib CREMA_SOURCE_DIR=${CREMA_SOURCE_DIR:-$PWD}
T=.gpu/bin/crema_gpu_tests
SKIP=-RuntimeCuda.OutOfMemorySaysHowMuch
RACE_LIMIT=${RACE_LIMIT:-300}; RACE_JOBS=${RACE_JOBS:-8}
run_tool() {  # tool name
  mkdir -p $L/tmp_$1
  local start=$(date +%s)
  TEST_TMPDIR=$L/tmp_$1 compute-sanitizer --tool $1 --error-exitcode 1 $T --gtest_brief=1 --gtest_filter=$SKIP > $L/$1.log 2>&1
  echo "$1: rc=$? $(( $(date +%s) - start )) s, $(grep -h 'ERROR SUMMARY' $L/$1.log | tail -1), $(grep -h 'PASSED\|FAILED' $L/$1.log | tr '\n' ' ')" > $L/$1.sum
}
mkdir -p $L/tmp_plain
start=$(date +%s)
TEST_TMPDIR=$L/tmp_plain $T --gtest_brief=1 > $L/plain.log 2>&1
echo "plain: rc=$? $(( $(date +%s) - start )) s, $(grep -h 'PASSED\|FAILED' $L/plain.log | tr '\n' ' ')" > $L/plain.sum
for tool in memcheck initcheck synccheck; do run_tool $tool & done
suites=$($T --gtest_list_tests | grep -v '^ ' | grep -v '^Running' | tr -d '.')
mkdir -p $L/race
for s in $suites; do echo $s; done | xargs -P $RACE_JOBS -I{} bash -c "mkdir -p $L/race/tmp_{}; s0=\$(date +%s); TEST_TMPDIR=$L/race/tmp_{} timeout $RACE_LIMIT compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 $T --gtest_brief=1 --gtest_filter='{}.*' > $L/race/{}.log 2>&1; echo \"{} rc=\$? \$(( \$(date +%s) - s0 )) s \$(grep -h 'RACECHECK SUMMARY' $L/race/{}.log | tail -1)\" > $L/race/{}.sum"
wait
{ cat $L/plain.sum $L/memcheck.sum $L/initcheck.sum $L/synccheck.sum
  echo "racecheck (rc 124 = stopped at ${RACE_LIMIT} s):"; cat $L/race/*.sum | sort -k2; } > $OUT/summary.txt
tar -C $L -czf $OUT/logs.tar.gz --exclude='tmp_*' .
cat $OUT/summary.txt
