"""Model adapters: every model becomes a traceable function ``[..., M] -> [..., K]``.

A JAX-traceable callable is used as it is. Anything else (a scikit-learn ``predict``, a
NumPy function) is detected because it cannot be traced, and is evaluated on the host
through :func:`jax.pure_callback`, in batches, so that the rest of the pipeline stays
one compiled program. Gradients flow only through JAX models.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

# Rows per host call for non-JAX models; large enough to amortise Python overhead.
HOST_BATCH_ROWS = 65536


@dataclasses.dataclass(frozen=True)
class Model:
    """A model normalised to two-dimensional outputs.

    Attributes:
      fn: traceable function mapping ``[..., M]`` inputs to ``[..., K]`` outputs.
      n_outputs: ``K``, the number of outputs.
      single_output: whether the user's model returns ``[n]`` (results drop the K axis).
      is_host: whether the model runs on the host through a callback (not differentiable).
      bytes_per_row: estimated working memory per evaluated row, for chunking.
    """

    fn: Callable[[jax.Array], jax.Array]
    n_outputs: int
    single_output: bool
    is_host: bool
    bytes_per_row: int


def _output_tail(shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    if len(shape) == 0 or shape[0] != n or len(shape) > 2:
        raise ValueError(
            f"`model` must map an [n, M] array to shape [n] or [n, K]; for n={n} it returned shape "
            f"{tuple(shape)}. Wrap it so that it returns one row of outputs per input row."
        )
    return tuple(shape[1:])


def _jax_memory_per_row(f: Callable, n_features: int, dtype: Any, probe_rows: int = 1024) -> int | None:
    try:
        spec = jax.ShapeDtypeStruct((probe_rows, n_features), dtype)
        stats = jax.jit(f).lower(spec).compile().memory_analysis()
        total = stats.temp_size_in_bytes + stats.output_size_in_bytes + stats.argument_size_in_bytes
        return max(int(total // probe_rows), 1)
    except Exception:  # memory analysis is best effort; not every backend reports it
        return None


def wrap_model(model: Callable, n_features: int, dtype: Any, probe: np.ndarray | jax.Array) -> Model:
    """Detect how to call ``model`` and return a :class:`Model`.

    Args:
      model: a callable ``[n, M] -> [n]`` or ``[n, K]``, JAX-traceable or plain NumPy.
      n_features: ``M``.
      dtype: floating dtype of the inputs (and of the outputs handed back).
      probe: a few valid input rows (the background) used to detect a host model's output shape.

    Raises:
      TypeError: when ``model`` is not callable or cannot be evaluated either way.
      ValueError: when the model's output does not have one row per input row.
    """
    if not callable(model):
        raise TypeError(f"`model` must be callable ([n, M] -> [n] or [n, K]); got {type(model).__name__}.")
    itemsize = jnp.dtype(dtype).itemsize
    try:
        out = jax.eval_shape(model, jax.ShapeDtypeStruct((2, n_features), dtype))
        traceable = isinstance(out, jax.ShapeDtypeStruct)
        trace_error = None
    except Exception as err:  # the model is not JAX-traceable: evaluate it on the host
        traceable, trace_error = False, err

    if traceable:
        tail = _output_tail(out.shape, 2)
        single = len(tail) == 0

        def fn(x):
            y = jnp.asarray(model(x.reshape(-1, n_features)))
            y = y.reshape(x.shape[:-1] + (-1,)) if not single else y.reshape(x.shape[:-1] + (1,))
            return y.astype(dtype)

        per_row = _jax_memory_per_row(model, n_features, dtype)
        k = 1 if single else tail[0]
        if per_row is None:
            per_row = 8 * itemsize * (n_features + k)
        return Model(fn, k, single, False, per_row)

    rows = np.asarray(probe[: min(len(probe), 2)], dtype=dtype)
    try:
        y = np.asarray(model(rows))
    except Exception as err:
        raise TypeError(
            "`model` could not be evaluated: it is not JAX-traceable "
            f"({type(trace_error).__name__}: {trace_error}) and calling it on a NumPy array of shape "
            f"{rows.shape} failed ({type(err).__name__}: {err})."
        ) from err
    tail = _output_tail(y.shape, rows.shape[0])
    single = len(tail) == 0
    k = 1 if single else tail[0]

    def host_call(x: np.ndarray) -> np.ndarray:
        flat = np.asarray(x).reshape(-1, n_features)
        parts = [
            np.asarray(model(flat[i : i + HOST_BATCH_ROWS])).reshape(-1, k)
            for i in range(0, flat.shape[0], HOST_BATCH_ROWS)
        ]
        out = np.concatenate(parts, axis=0) if parts else np.zeros((0, k))
        return out.reshape(x.shape[:-1] + (k,)).astype(dtype)

    def fn(x):
        shape = jax.ShapeDtypeStruct(x.shape[:-1] + (k,), dtype)
        return jax.pure_callback(host_call, shape, x, vmap_method="expand_dims")

    return Model(fn, k, single, True, 4 * itemsize * (n_features + k))
