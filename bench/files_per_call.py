"""Count the package files one Kernel call and one Tree call run code in (issue 48's measure).

``python -m bench.files_per_call`` builds and calls each explainer once to import and compile
everything, then repeats the same construction and call under ``sys.setprofile`` and lists every
file below ``jaxshap/`` whose code ran: a KernelExplainer on a JAX tanh MLP (8 features, 50
background rows, 10 rows) and a TreeExplainer on an XGBoost regressor (20 trees of depth 4).
"""

from __future__ import annotations

import os
import sys

import jax.numpy as jnp
import numpy as np

import jaxshap

ROOT = os.path.dirname(jaxshap.__file__)


def files_run(call) -> list[str]:
    """The files below ``jaxshap/`` with code that ``call()`` runs, after a first call that warms up."""
    call()
    seen: set[str] = set()

    def profile(frame, event, arg):
        name = frame.f_code.co_filename
        if name.startswith(ROOT):
            seen.add(os.path.relpath(name, ROOT))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return sorted(seen)


def main() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8)).astype(np.float32)
    W = jnp.asarray(rng.normal(size=(8, 16)), jnp.float32)
    model = lambda x: jnp.tanh(x @ W).sum(-1)  # noqa: E731
    kernel = files_run(lambda: np.asarray(jaxshap.KernelExplainer(model, X[:50])(X[:10]).values))
    print(f"KernelExplainer: {len(kernel)} files\n  " + "\n  ".join(kernel))
    import xgboost

    y = X[:, 0] + X[:, 1] * X[:, 2]
    booster = xgboost.XGBRegressor(n_estimators=20, max_depth=4).fit(X, y)
    tree = files_run(lambda: np.asarray(jaxshap.TreeExplainer(booster)(X[:10]).values))
    print(f"TreeExplainer: {len(tree)} files\n  " + "\n  ".join(tree))


if __name__ == "__main__":
    main()
