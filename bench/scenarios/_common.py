"""Data and models shared by scenarios."""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from ..harness import mlp, mlp_params


def mlp_problem(n_features: int, n_background: int, n_rows: int, seed: int = 0, hidden: int = 64):
    """A random MLP, a background and rows to explain, as float32 NumPy arrays.

    Returns:
      ``(jax_model, numpy_model, background, X)``: the same model as a JAX callable and as a
      NumPy callable (for shap), evaluated through one jitted function.
    """
    params = mlp_params(jax.random.key(seed), n_features, hidden)
    model = partial(mlp, params)
    jitted = jax.jit(model)
    numpy_model = lambda x: np.asarray(jitted(np.asarray(x, np.float32)))
    rng = np.random.default_rng(seed)
    background = rng.normal(size=(n_background, n_features)).astype(np.float32)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    return model, numpy_model, background, X
