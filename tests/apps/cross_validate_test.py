#!/usr/bin/env python3
"""cross_validate_test.py: scripts/cross_validate.py's refit (`best`) on a hand-worked example.

Two rows whose errors are linear in the constant, zero at 0.5 (row a) and at 0.7 (row b), on the
grid 0.5, 0.6, 0.7: squared-error sums 400, 200, 400 with both rows, so 0.6; without b, 0.5;
without a, 0.7. On a tie the lower value wins (as scripts/fit_gemm_efficiency.py's min() does);
with no rows there is nothing to fit."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import cross_validate  # noqa: E402

grid = [0.5, 0.6, 0.7]
errors = {v: {"a": (v - 0.5) * 100, "b": (v - 0.7) * 100} for v in grid}
checks = [
    (cross_validate.best(grid, errors, ["a", "b"]), 0.6),
    (cross_validate.best(grid, errors, ["a"]), 0.5),
    (cross_validate.best(grid, errors, ["b"]), 0.7),
    (cross_validate.best([0.5, 0.7], errors, ["a", "b"]), 0.5),
    (cross_validate.best(grid, errors, []), None),
]
bad = [(got, want) for got, want in checks if got != want]
for got, want in bad:
    print("FAIL: best() gave %r, want %r" % (got, want))
print("FAIL" if bad else "PASS")
sys.exit(1 if bad else 0)
