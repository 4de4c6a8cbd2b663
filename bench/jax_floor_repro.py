"""Standalone check (pure JAX, no jaxshap) of the XLA:CPU constant-folding bug behind the jax floor.

On the affected jaxlib releases, XLA:CPU folds two gathers from one closed-over constant, combined
elementwise, into a wrong constant (openxla/xla#34260, reported as jax-ml/jax#33479): ``jax.jit``
returns a permutation of the right values, with no error. The second case is KernelSHAP's
third-order controls written as one gather per member of each triple (``u[:, a] * u[:, b] *
u[:, c]``) of the enumerated coalitions, which a fully enumerated plan makes constant.

Run: ``python bench/jax_floor_repro.py``. It prints the jax version and ``OK`` or ``WRONG`` per
case, and exits 1 when any case is wrong. ``XLA_FLAGS=--xla_disable_hlo_passes=constant_folding``
makes every case right on the affected releases. Checked on CPU: wrong on jaxlib 0.7.0, 0.8.0 and
0.8.1; right on 0.8.2, 0.8.3, 0.9.0, 0.9.2 and 0.10.2.
"""

from __future__ import annotations

import itertools
import sys

import jax
import jax.numpy as jnp
import numpy as np


def cases():
    """``(name, fn)`` pairs: ``fn()`` gathers twice or more from closed-over constants."""
    x = jnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    a = jnp.array([0, 0, 0, 1], jnp.int32)
    b = jnp.array([1, 1, 2, 2], jnp.int32)
    yield "x[:, a] + 100 x[:, b] (x, a, b constants)", lambda: x[:, a] + 100.0 * x[:, b]

    # KernelSHAP's third-order Walsh controls of the 14 enumerated coalitions of 4 features
    m = 4
    masks = jnp.asarray([s for s in itertools.product([0, 1], repeat=m) if 0 < sum(s) < m], bool)
    triples = np.array(list(itertools.combinations(range(m), 3)), np.int32)
    i, j, k = (jnp.asarray(triples[:, n]) for n in range(3))

    def controls():
        z = masks.astype(jnp.float32)
        u = 2.0 * z - 1.0
        return u[:, i] * u[:, j] * u[:, k] + 1.0 - (2.0 / 3.0) * (z[:, i] + z[:, j] + z[:, k])

    yield "third-order controls of enumerated coalitions (M=4)", controls


def main() -> int:
    print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, {jax.default_backend()}")
    wrong = 0
    for name, fn in cases():
        eager, jitted = np.asarray(fn()), np.asarray(jax.jit(fn)())
        error = float(np.abs(eager - jitted).max())
        wrong += error > 1e-6
        print(f"{'OK   ' if error <= 1e-6 else 'WRONG'} {name}: max |jit - eager| = {error:.3g}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
