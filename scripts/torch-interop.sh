#!/usr/bin/env bash
# torch-interop.sh — pipetwin's schedules against torch.distributed.pipelining (issue 13).
#
#   scripts/torch-interop.sh [OUT.md]        (default results/torch-interop.md)
#
# 1. A venv at $PIPETWIN_TORCH_VENV (default /work/.venv-torch) with torch from PyPI (created
#    when missing; never deleted: other scripts may share it).
# 2. Orders: torch's own schedule classes dump their compute-only order
#    (scripts/torch_schedules.py); pipetwin writes its own (`pipetwin schedule --format
#    compute_only`); both are compared rank by rank (torch's idle cells dropped, its
#    OVERLAP_F_B pairs read as their two actions) for gpipe, 1f1b, interleaved-1f1b, zb-h1,
#    zbv, dualpipev at pp 2, 4 and m 4, 8.
# 3. Runs: pipetwin's compute_comms CSV of every generator at pp 2, 4 and m 8 runs on torch's
#    _PipelineScheduleRuntime (gloo, CPU, torchrun; scripts/torch_run_csv.py), and so does
#    torch's own schedule class; each rank's gradients are compared with a single-process
#    reference (relative error, limit 1e-6).
# 4. The same with `--format compute_only --idle-cells` on torch's PipelineScheduleMulti.
# Needs a built pipetwin ($PIPETWIN_BIN, default build/default/apps/pipetwin).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/torch-interop.md}
venv=${PIPETWIN_TORCH_VENV:-/work/.venv-torch}
bin=${PIPETWIN_BIN:-build/default/apps/pipetwin}
[ -x "$bin" ] || { echo "torch-interop.sh: $bin not found (build first, or set PIPETWIN_BIN)" >&2; exit 2; }

if ! "$venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install torch numpy  # numpy: torch pipelining infers stage shapes with it
fi
py="$venv/bin/python"
torch_version=$("$py" -c "import torch; print(torch.__version__)")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" scripts/torch_schedules.py "$tmp/torch" --pp 2 4 --m 4 8 >/dev/null 2>"$tmp/dump.err" || true

vpp_of() { case $1 in interleaved-1f1b|zbv|dualpipev) echo 2 ;; *) echo 1 ;; esac; }
placement_of() { case $1 in zbv|dualpipev) echo v ;; *) echo loop ;; esac; }
job() {  # job NAME PP M -> path
  local f="$tmp/$1-p$2-m$3.yaml"
  printf 'schedule: %s\nmicrobatches: %s\nparallel: {pp: %s, vpp: %s}\ncosts: {forward_ms: 1.0}\n' \
    "$1" "$3" "$2" "$(vpp_of "$1")" > "$f"
  echo "$f"
}
# torch's rows with idle cells dropped and OVERLAP_F_B pairs split, one action per line per rank.
normalise() {
  "$py" - "$1" <<'EOF'
import csv, re, sys
for row in csv.reader(open(sys.argv[1])):
    cells = []
    for c in row:
        c = c.strip()
        m = re.fullmatch(r"\((.*)\)OVERLAP_F_B", c)
        parts = [s.strip() for s in m.group(1).split(";")] if m else ([c] if c else [])
        cells += [x for x in parts if re.fullmatch(r"\d+[FBIW]\d+", x)]  # compute only
    print(",".join(cells))
EOF
}

schedules="gpipe 1f1b interleaved-1f1b zb-h1 zbv dualpipev"
{
  echo "# pipetwin and torch.distributed.pipelining (torch $torch_version)"
  echo
  echo "Written by \`scripts/torch-interop.sh\` ($(date -u +%Y-%m-%d)). Orders: torch's schedule"
  echo "classes on mock stages (\`scripts/torch_schedules.py\`) against \`pipetwin schedule --format"
  echo "compute_only\`, rank by rank (torch's idle cells dropped, \`OVERLAP_F_B\` read as its two"
  echo "actions). Runs: \`pipetwin schedule --format compute_comms\` loaded by torch's"
  echo "\`_PipelineScheduleRuntime._load_csv(..., format=\"compute_comms\")\`, and torch's own"
  echo "schedule class, each run once with gloo on CPU under torchrun (\`scripts/torch_run_csv.py\`:"
  echo "a stack of Linear+tanh blocks in float64, 2 samples per microbatch); the largest relative"
  echo "gradient error of any parameter against a single-process reference (limit 1e-6)."
  echo
  echo "## Orders"
  echo
  echo "| schedule | pp | m | identical |"
  echo "| --- | --- | --- | --- |"
} > "$tmp/report.md"
for s in $schedules; do
  for pp in 2 4; do
    for m in 4 8; do
      t="$tmp/torch/$s-p$pp-m$m.compute_only.csv"
      if [ ! -f "$t" ]; then
        why=$(grep "^$s pp $pp m $m" "$tmp/dump.err" | sed 's/.*refuses: //' | head -c 100 || true)
        echo "| $s | $pp | $m | torch refuses ($why) |" >> "$tmp/report.md"
        continue
      fi
      if ! "$bin" schedule "$(job "$s" "$pp" "$m")" --format compute_only > "$tmp/pt.csv" 2> "$tmp/pt.err"; then
        echo "| $s | $pp | $m | pipetwin refuses ($(head -c 80 "$tmp/pt.err")) |" >> "$tmp/report.md"
        continue
      fi
      normalise "$t" > "$tmp/torch.norm"
      if cmp -s "$tmp/torch.norm" "$tmp/pt.csv"; then
        echo "| $s | $pp | $m | yes |" >> "$tmp/report.md"
      else
        r=$(diff "$tmp/torch.norm" "$tmp/pt.csv" | grep -m1 '^[0-9]' | sed 's/[^0-9].*//' || true)
        echo "| $s | $pp | $m | no (rank $((r - 1)) differs) |" >> "$tmp/report.md"
      fi
    done
  done
done
{
  echo
  echo "## Runs on torch's runtime (m 8)"
  echo
  echo "| schedule | pp | pipetwin's compute_comms CSV | torch's own schedule |"
  echo "| --- | --- | --- | --- |"
} >> "$tmp/report.md"
port=29611
run() {  # run PP CHUNKS PLACEMENT ARGS... -> "max_rel_err=... ok=..." or the failure
  local pp=$1 chunks=$2 placement=$3; shift 3
  port=$((port + 1))
  local o
  if o=$(timeout 900 "$venv/bin/torchrun" --nnodes 1 --nproc-per-node "$pp" --master-addr 127.0.0.1 \
      --master-port "$port" scripts/torch_run_csv.py --pp "$pp" --chunks "$chunks" \
      --placement "$placement" "$@" 2>"$tmp/run.err"); then
    echo "$o" | grep -m1 max_rel_err || echo "no result line"
  else
    echo "FAILED: $(echo "$o" | grep -m1 max_rel_err || true) $(grep -m1 -E 'Error' "$tmp/run.err" | head -c 120 || true)"
  fi
}
for s in $schedules; do
  for pp in 2 4; do
    m=8
    chunks=$(vpp_of "$s")
    placement=$(placement_of "$s")
    if "$bin" schedule "$(job "$s" "$pp" "$m")" --format compute_comms --csv "$tmp/$s-$pp.csv" 2>/dev/null; then
      mine=$(run "$pp" "$chunks" "$placement" --microbatches "$m" --csv "$tmp/$s-$pp.csv" --format compute_comms)
    else
      mine="pipetwin refuses"
    fi
    theirs=$(run "$pp" "$chunks" "$placement" --microbatches "$m" --torch "$s")
    echo "| $s | $pp | $mine | $theirs |" >> "$tmp/report.md"
  done
done
# 4. torch's PipelineScheduleMulti: compute_only rows with step-aligned idle cells
#    (`--idle-cells`), sends and receives matched by step; torch's own dump as a control.
{
  echo
  echo "## Runs on torch's PipelineScheduleMulti (m 8)"
  echo
  echo "\`pipetwin schedule --format compute_only --idle-cells\` loaded by"
  echo "\`PipelineScheduleMulti._load_csv\` (sends and receives matched by step), and, as a control,"
  echo "torch's own compute-only dump of the same schedule (with its idle cells) through the same"
  echo "runner. Identical cells: whether the two files are equal, idle cells included."
  echo
  echo "| schedule | pp | identical cells | pipetwin's CSV | torch's own dump |"
  echo "| --- | --- | --- | --- | --- |"
} >> "$tmp/report.md"
for s in $schedules; do
  for pp in 2 4; do
    m=8
    chunks=$(vpp_of "$s")
    placement=$(placement_of "$s")
    t="$tmp/torch/$s-p$pp-m$m.compute_only.csv"
    if "$bin" schedule "$(job "$s" "$pp" "$m")" --format compute_only --idle-cells \
        --csv "$tmp/$s-$pp-idle.csv" 2>/dev/null; then
      mine=$(run "$pp" "$chunks" "$placement" --microbatches "$m" --csv "$tmp/$s-$pp-idle.csv" --multi)
    else
      mine="pipetwin refuses"
    fi
    if [ -f "$t" ]; then
      same=$(cmp -s <(tr -d '\r' < "$t") "$tmp/$s-$pp-idle.csv" && echo yes || echo no)
      theirs=$(run "$pp" "$chunks" "$placement" --microbatches "$m" --csv "$t" --multi)
    else
      same="-"
      theirs="no dump"
    fi
    echo "| $s | $pp | $same | $mine | $theirs |" >> "$tmp/report.md"
  done
done
mkdir -p "$(dirname "$out")"
cp "$tmp/report.md" "$out"
cat "$out"
