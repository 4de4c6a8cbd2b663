import logging
import os
import sys

import jax
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


class CountCompiles(logging.Handler):
    """Counts XLA compilations (``jax_log_compiles``) inside a ``with`` block."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Finished XLA compilation of"):
            self.names.append(message.split()[4])

    def __enter__(self):
        self._old = jax.config.jax_log_compiles
        jax.config.update("jax_log_compiles", True)
        logging.getLogger("jax").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("jax").removeHandler(self)
        jax.config.update("jax_log_compiles", self._old)
