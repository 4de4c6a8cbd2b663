"""shap's function maskers: a callable ``masker(mask, x)`` that returns the masked rows."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._core._inputs import as_matrix
from .._core._pytree import Static
from ._base import Masker


def is_function_masker(masker: Any) -> bool:
    """A plain callable given where a masker goes (shap's custom-masker API): not a masker,
    not rows, not a summary."""
    return callable(masker) and not hasattr(masker, "coalition_values") and not hasattr(masker, "shape")


class FunctionMasker(Masker):
    r"""A masking function as a masker: ``v_x(S) = mean_r f(masker(S, x)_r)``.

    shap's custom-masker API: ``masker(mask, x)`` takes a boolean mask ``[M]`` (``True``: the
    feature keeps the row's value) and one row ``x`` ``[M]`` (NumPy) and returns the masked
    rows ``[r, M]`` (or one row ``[M]``), over which the model's output is averaged. It runs on
    the host (through :func:`jax.pure_callback`), once per coalition; it must return the same
    number of rows ``r`` for every mask (``r`` is read from a first call on ``probe_x``).

    Args:
      fn: the masking function.
      probe_x: a row ``[M]`` (the first explained row) that fixes ``M``, ``r`` and the dtype.

    Raises:
      ValueError: when ``fn`` does not return rows of ``M`` columns.
    """

    def __init__(self, fn: Callable, probe_x: Any):
        x = np.asarray(as_matrix(probe_x, "X")[0])
        m = x.shape[0]
        rows = self._rows(fn, np.ones(m, bool), x)
        self.fn, self.m, self.r = Static(fn), m, rows.shape[0]
        self.rows = jnp.asarray(rows, x.dtype)

    @staticmethod
    def _rows(fn: Callable, mask: np.ndarray, x: np.ndarray) -> np.ndarray:
        out = np.asarray(fn(mask, x))
        if out.ndim not in (1, 2) or out.shape[-1] != x.shape[0]:
            raise ValueError(
                f"the masking function must return rows [r, {x.shape[0]}] (or one row [{x.shape[0]}]) for "
                f"masker(mask, x); it returned shape {out.shape}."
            )
        return out.reshape(-1, x.shape[0])

    @property
    def n_features(self) -> int:
        return self.m

    @property
    def dtype(self):
        return self.rows.dtype

    @property
    def evals_per_coalition(self) -> int:
        return self.r

    @property
    def probe_rows(self) -> jax.Array:
        return self.rows

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        fn, r, m, dtype = self.fn.value, self.r, self.m, np.dtype(self.dtype)

        def host(xv, mv):
            out = [self._rows(fn, np.asarray(k, bool), np.asarray(xv)) for k in np.asarray(mv)]
            if any(o.shape[0] != r for o in out):
                raise ValueError(f"the masking function returned a number of rows other than its first call's {r}.")
            return np.stack(out).astype(dtype).reshape(len(out), r, m)

        shape = jax.ShapeDtypeStruct((masks.shape[0], r, m), dtype)
        inputs = jax.pure_callback(host, shape, x, masks, vmap_method="sequential")
        return f(inputs).mean(axis=1)

    def __repr__(self) -> str:
        return f"FunctionMasker({getattr(self.fn.value, '__name__', 'masker')}, rows per coalition: {self.r})"
