#!/usr/bin/env bash
# footprint_test.sh ldd|rss PIPETWIN SOURCE_DIR: the CPU-only front door pays nothing for CUDA.
#   ldd: `pipetwin` links none of libcublas, libcublasLt, libnccl, libcudart (the CUDA backend
#        lives in `pipetwin-cuda`); skipped (77) where ldd is missing.
#   rss: `pipetwin simulate examples/schedules/1f1b.yaml` peaks below 64 MiB resident, as
#        /usr/bin/time -v measures it (scripts/deps.sh installs `time`; skipped without it).
set -u
mode="$1" bin="$2" src="$3"
case "$mode" in
  ldd)
    command -v ldd >/dev/null || { echo "ldd not found: skipped"; exit 77; }
    libs=$(ldd "$bin") || { echo "ldd $bin failed"; exit 1; }
    if bad=$(grep -iE 'libcublas|libcublasLt|libnccl|libcudart' <<<"$libs"); then
      echo "$bin links CUDA libraries:"
      echo "$bad"
      exit 1
    fi
    echo "$bin links no CUDA library"
    ;;
  rss)
    [ -x /usr/bin/time ] || { echo "/usr/bin/time not found (scripts/deps.sh): skipped"; exit 77; }
    out=$(/usr/bin/time -v "$bin" simulate "$src/examples/schedules/1f1b.yaml" 2>&1 >/dev/null) ||
      { echo "$out"; exit 1; }
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): *\([0-9]*\).*/\1/p' <<<"$out")
    [ -n "$kb" ] || { echo "no 'Maximum resident set size' in:"; echo "$out"; exit 1; }
    limit=$((64 * 1024))
    echo "pipetwin simulate peaked at $kb KiB resident (limit $limit KiB)"
    [ "$kb" -lt "$limit" ] || exit 1
    ;;
  *)
    echo "usage: footprint_test.sh ldd|rss PIPETWIN SOURCE_DIR"
    exit 2
    ;;
esac
