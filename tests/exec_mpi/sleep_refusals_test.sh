#!/usr/bin/env bash
# sleep_refusals_test.sh PIPETWIN JOBS_DIR MPIEXEC: what the sleep backend cannot do exits 2
# with a message naming the key. (Stragglers on the CPU backend run since issue 15:
# exec_cpu_stragglers.)
set -u
bin=$1 jobs=$2 mpiexec=$3
bad=0
expect() {  # expect NP WANT_TEXT ARGS...: exit status 2 and WANT_TEXT in the output
  local np=$1 want=$2 out rc
  shift 2
  out=$("$mpiexec" --oversubscribe -np "$np" "$bin" run "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq 2 ] && grep -qF -- "$want" <<<"$out"; then
    echo "ok   exit 2 naming '$want': run $*"
  else
    echo "FAIL exit $rc, wanted 2 and '$want': run $*"
    echo "$out" | tail -3
    bad=1
  fi
}
expect 2 "--check-reference" "$jobs/sleep-gpipe.yaml" --backend sleep --check-reference
expect 2 "costs" "$jobs/1f1b.yaml" --backend sleep
expect 2 "parallel.tp" "$jobs/tp2.yaml" --backend sleep
expect 2 "parallel.cp" "$jobs/cp2.yaml" --backend sleep
expect 2 "--profile" "$jobs/1f1b.yaml" --backend cpu --profile /dev/null
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
