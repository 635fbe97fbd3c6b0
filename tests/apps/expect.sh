# expect.sh — sourced by the command-line tests (cli_test.sh, hostile_test.sh) after they set
# `bin` (the pipetwin binary): a scratch folder `dir`, the failure flag `fail`, and
#   expect STATUS PATTERN -- ARGS...   run pipetwin ARGS, want exit STATUS and PATTERN (ERE)
#   job NAME TEXT                      write TEXT (printf %b) to $dir/NAME, print the path
dir=$(mktemp -d)
fail=0
expect() {
  local want=$1 pattern=$2
  shift 3
  local out rc
  out=$("$bin" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: pipetwin $* -> exit $rc (want $want), output:"
    echo "$out" | head -8
    fail=1
  else
    echo "ok: pipetwin $* -> $rc"
  fi
}
job() { printf '%b' "$2" > "$dir/$1"; echo "$dir/$1"; }
