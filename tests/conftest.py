import os
import sys

import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("MPLBACKEND", "Agg")


def make_mlp(seed: int, n_features: int, hidden: int = 8, n_outputs: int | None = None):
    """A small random tanh MLP as (params, apply) with ``apply(params, X)``."""
    rng = np.random.default_rng(seed)
    out = () if n_outputs is None else (n_outputs,)
    params = {
        "w1": jnp.asarray(rng.normal(size=(n_features, hidden)), jnp.float32),
        "b1": jnp.asarray(rng.normal(size=hidden), jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(hidden,) + out), jnp.float32),
    }

    def apply(p, X):
        return jnp.tanh(X @ p["w1"] + p["b1"]) @ p["w2"]

    return params, apply


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
