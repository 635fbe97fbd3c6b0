#!/usr/bin/env bash
# fuzz.sh [SECONDS_PER_TARGET] [TARGET...]: builds the libFuzzer targets of fuzz/ with clang
# (ASan + UBSan) in build/fuzz and runs each for a bounded time (default 15 s) on a seed
# corpus made from examples/ and tests/ data (fuzz_cli: the command lines in fuzz/seeds/fuzz_cli,
# run on inputs copied from examples/). A crash, a sanitizer report, a leak, a timeout
# or more than 1 GB of RSS fails the run (exit 1); the reproducer is left in build/fuzz/crashes.
#
#   scripts/fuzz.sh 300 fuzz_csv     # five minutes on the CSV reader
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-15}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_job fuzz_csv fuzz_profile fuzz_report fuzz_cli)
out=build/fuzz
# FUZZ_NO_BUILD=1: run what build/fuzz holds (built by hand, or by another run of this script).
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
  cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DPIPETWIN_FUZZ=ON -DPIPETWIN_WITH_CUDA=OFF -DBUILD_TESTING=OFF -DPIPETWIN_BUILD_BENCH=OFF \
    ${FUZZ_CMAKE_ARGS:-} >/dev/null
  cmake --build "$out" -j "$(nproc)" --target "${targets[@]}"
fi

# Seeds: the repository's own inputs of each kind (the corpus dir keeps what the fuzzer finds).
seed() {  # seed NAME FIND-ARGS...
  local dir="$out/corpus/$1"
  shift
  mkdir -p "$dir"
  cp -n fuzz/seeds/"$(basename "$dir")"/* "$dir/" 2>/dev/null || true
  find examples tests "$@" -type f -size -64k -exec cp -n {} "$dir/" \; 2>/dev/null || true
}
seed fuzz_job -name '*.yaml'
seed fuzz_csv -name '*.csv'
seed fuzz_profile -name '*profile*.yaml'
seed fuzz_report -name '*.json'
mkdir -p "$out/corpus/fuzz_cli"
cp -n fuzz/seeds/fuzz_cli/* "$out/corpus/fuzz_cli/"
mkdir -p "$out/crashes"

# ASan's quarantine (256 MB by default) holds freed memory to catch a use after free; over a
# long run it and the allocator's caches add up past -rss_limit_mb, with no single input to
# blame (a 1.8M-action schedule: 109 MB natively, 431 MB under ASan alone, 1 GB after 400k
# runs). 64 MB still catches a use right after the free.
export ASAN_OPTIONS="${ASAN_OPTIONS:-quarantine_size_mb=64}"
status=0
for t in "${targets[@]}"; do
  echo "== $t: $secs s"
  mkdir -p "$out/corpus/$t"
  extra=()
  # The command line prints a message per bad argv: the target's stderr is closed.
  [ "$t" = fuzz_cli ] && extra=(-close_fd_mask=2 -max_len=4096)
  # Absolute paths: fuzz_cli changes its working directory (to its sandbox).
  if ! "$PWD/$out/fuzz/$t" "$PWD/$out/corpus/$t" -max_total_time="$secs" -rss_limit_mb=1024 \
    -timeout=20 -max_len=65536 -print_final_stats=1 -artifact_prefix="$PWD/$out/crashes/$t-" \
    "${extra[@]}" 2>"$out/$t.log"; then
    echo "FAIL: $t (see $out/$t.log and $out/crashes/)"
    tail -40 "$out/$t.log"
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/$t.log" | sed "s/^/  /"
done
exit "$status"
