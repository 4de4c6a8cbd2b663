"""Accuracy of LinearExplainer (correlation-dependent) against condition number, float32 and float64.

Not a timed scenario: ``python bench/precision_linear.py`` prints the worst relative error over 3
seeds (M=6, exact method) against the float64 NumPy oracle of ``tests/``, for the README's
"Precision guarantees" table.
"""

import os
import sys
import warnings

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from test_numerics import conditioned_problem, relative_error  # noqa: E402

warnings.simplefilter("ignore")
print("| condition | float32 | float64 |")
print("|---|---|---|")
for cond in [1e2, 1e4, 1e5, 1e6, 1e7, 1e8, 1e10, 1e12, 1e14]:
    e32 = max(relative_error(*conditioned_problem(6, cond, s), np.float32) for s in range(3))
    with jax.enable_x64(True):
        e64 = max(relative_error(*conditioned_problem(6, cond, s), np.float64) for s in range(3))
    print(f"| {cond:.0e} | {e32:.1e} | {e64:.1e} |", flush=True)
