#!/usr/bin/env bash
# format_test.sh SOURCE_DIR: every tracked C++/CUDA file is formatted by the repository's
# .clang-format (run `clang-format -i FILE` to fix).
cd "$1" || exit 1
bad=0
for f in $(git ls-files '*.cc' '*.h' '*.cu'); do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "not formatted: $f"; bad=1; }
done
[ "$bad" -eq 0 ] && echo "all files formatted"
exit "$bad"
