#!/usr/bin/env bash
# bad_input_once_test.sh PIPETWIN JOBS_DIR MPIEXEC: bad input to `run` and `calibrate` on many
# ranks exits 2 and says so exactly once, every time. Every rank finds the same fault; they
# agree on it before anything else and leave through MPI_Finalize. (When rank 0 printed and every
# rank called MPI_Abort, a rank that aborted first killed rank 0 before it printed: CI saw
# "mpirun -np 8" refused with MPI_ABORT's text alone.) Each case runs REPS times.
set -u
bin=$1 jobs=$2 mpiexec=$3
reps=${REPS:-6}
bad=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect_once() {  # expect_once NP WANT_TEXT ARGS...
  local np=$1 want=$2 out rc said i
  shift 2
  for i in $(seq "$reps"); do
    # ULIMIT_V (KiB): the address-space limit of the launcher and its ranks, in this case only.
    out=$([ -z "${ULIMIT_V:-}" ] || ulimit -v "$ULIMIT_V"
          "$mpiexec" --oversubscribe -np "$np" "$bin" "$@" 2>&1)
    rc=$?
    said=$(grep -c '^pipetwin:' <<<"$out")
    if [ "$rc" -ne 2 ] || [ "$said" -ne 1 ] || ! grep -qF -- "$want" <<<"$out" ||
       grep -q MPI_ABORT <<<"$out"; then
      echo "FAIL try $i: exit $rc, $said 'pipetwin:' lines, wanted exit 2, one line naming '$want': $*"
      echo "$out" | head -5
      bad=1
      return
    fi
  done
  echo "ok   $reps of $reps: exit 2, said once, naming '$want': -np $np $*"
}
# The world mpirun started does not fit the job (found inside RunJob, on every rank).
expect_once 8 "use mpirun -np 4" run "$jobs/sleep-pp2-dp2.yaml" --backend sleep
expect_once 8 "mpirun -np 10" run "$jobs/sleep-pp2-dp4-ps2.yaml" --backend sleep
# What the backend refuses (after the groups are made, before the first step).
expect_once 2 "costs" run "$jobs/1f1b.yaml" --backend sleep
expect_once 2 "parallel.tp" run "$jobs/tp2.yaml" --backend sleep
# More memory than this machine has (simulate's predicted peaks, before anything is allocated;
# it ended in std::bad_alloc, exit 1, or the OOM killer).
expect_once 2 "on this machine need" run "$jobs/too-big-for-memory.yaml" --backend cpu
expect_once 2 "on this machine need" calibrate "$jobs/too-big-for-memory.yaml" --backend cpu \
  --out "$dir/profile.yaml"
# Parameter servers count too: the server (world rank 2) holds all of GPT-3 175B's
# 175,221,817,344 parameters (96 × (12h² + 13h) + 2·vocab·h + seq·h + 2h, untied, h 12288), its
# 2 Adam floats and the 2 workers' pushes: × 20 B = 3263.76 GiB.
expect_once 3 "rank 2 the most, 3263.76 GiB" run "$jobs/too-big-servers.yaml" --backend cpu
# A rank's address space limited below its predicted peak (ulimit -v 1.5 GiB, about 2.3 GiB a
# rank): with too little to spare OpenBLAS spun forever in a failing malloc. The headroom asked
# is 128 MiB + 160 MiB per GEMM thread (execution.threads, 1 here), whatever the machine's
# cores. Not under ASan, whose shadow memory needs terabytes of address space.
if ldd "$bin" | grep -q libasan; then
  echo "skip ulimit -v: $bin is built with AddressSanitizer"
else
  ULIMIT_V=1572864 expect_once 2 "0.28 GiB more for the BLAS library's buffers (1 GEMM thread" \
    run "$jobs/over-address-space.yaml" --backend cpu
  ULIMIT_V=1572864 expect_once 2 "ulimit -v" calibrate "$jobs/over-address-space.yaml" \
    --backend cpu --out "$dir/profile.yaml"
fi
# The job file (found before RunJob) and the flags.
expect_once 6 "cannot open" run "$jobs/no-such-job.yaml" --backend cpu
expect_once 6 "--backend" run "$jobs/1f1b.yaml" --backend abacus
expect_once 6 "cannot open" calibrate "$jobs/no-such-job.yaml" --backend cpu --out "$dir/profile.yaml"
# A bad command line: said by the launcher's rank 0 before MPI starts (every rank has the same
# argv; a machine that cannot start MPI's daemon must not turn it into exit 1).
expect_once 6 "expected exactly one job file" run --backend cpu
expect_once 6 "unknown option --frob" calibrate "$jobs/1f1b.yaml" --frob 1
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
