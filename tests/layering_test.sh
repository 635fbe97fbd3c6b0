#!/usr/bin/env bash
# layering_test.sh SOURCE_DIR: the #include rules of DESIGN.md's layers. Fails naming each
# file and include that breaks one:
#   - Eigen only inside exec/cpu/;
#   - exec/ itself (the engine, RunJob, Calibrate, the interfaces) and exec/model/ include no
#     backend (exec/cpu/, exec/cuda/); backends register with exec/backend_registry.h;
#   - sim/ and exec/ never include each other;
#   - schedule/ includes none of models/, sim/, exec/, compare/, apps/;
#   - models/ includes none of job/, sim/, exec/, compare/, workflow/, apps/;
#   - job/ (the resolved job and the one report builder) includes none of sim/, exec/,
#     compare/, workflow/, apps/;
#   - compare/ needs only the report type; workflow/ starts `pipetwin run` as a process and
#     never includes exec/.
# docs/architecture.md draws the same map.
cd "$1" || exit 1
bad=0
# check FILES INCLUDES WHY [EXCEPT]: no tracked C++/CUDA file whose path matches the regex
# FILES (and not EXCEPT) may have an #include line whose target matches the regex INCLUDES.
check() {
  local files_re="$1" inc_re="$2" why="$3" except_re="${4:-^$}" f line
  while IFS= read -r f; do
    while IFS= read -r line; do
      echo "layering: $f:${line%%:*}: ${line#*:} ($why)"
      bad=1
    done < <(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($inc_re)" "$f")
  done < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp' | grep -E "$files_re" |
             grep -vE "$except_re")
}
check '.' 'Eigen/|unsupported/Eigen/|eigen3/' 'Eigen stays inside exec/cpu/' '^exec/cpu/'
check '^exec/[^/]+$|^exec/model/' 'exec/cpu/|exec/cuda/' \
  'exec/ and exec/model/ include no backend: backends register with exec/backend_registry.h'
check '^sim/' 'exec/' 'sim/ and exec/ never include each other'
check '^exec/' 'sim/' 'sim/ and exec/ never include each other'
check '^schedule/' 'models/|job/|sim/|exec/|compare/|workflow/|apps/' 'schedule/ includes nothing of ours'
check '^models/' 'job/|sim/|exec/|compare/|workflow/|apps/' 'models/ depends only on schedule/'
check '^job/' 'sim/|exec/|compare/|workflow/|apps/' 'job/ depends only on schedule/ and models/'
check '^compare/' 'models/|job/|sim/|exec/|workflow/|apps/' 'compare/ needs only the report type'
check '^workflow/' 'exec/|apps/' 'workflow/ starts run as a process: it never links exec/'
check '^(schedule|models|job|sim|exec|compare|workflow)/' 'apps/' 'nothing includes apps/'
[ "$bad" -eq 0 ] && echo "layering rules hold"
exit "$bad"
