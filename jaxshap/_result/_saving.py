"""Writing an :class:`~jaxshap.Explanation` to a NumPy ``.npz`` file and reading it back (no pickle)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

_ARRAYS = ("values", "base_values", "data", "stderr", "interaction_values")


def save(expl: Any, file: Any) -> None:
    """Write the arrays, names, axes and ``display_data`` of ``expl`` to ``file`` (``.npz``).

    ``display_data`` of Python objects (strings and numbers mixed, as from a DataFrame) is written
    as text, since an ``.npz`` without pickle holds no objects.
    """
    arrays = {}
    for name in _ARRAYS:
        leaf = getattr(expl, "_" + name, None)
        if leaf is not None:
            arrays[name] = np.asarray(leaf)
    arrays["feature_names"] = np.asarray(expl._feature_names, dtype=str)
    if expl._output_names is not None:
        arrays["output_names"] = np.asarray(expl._output_names, dtype=str)
    arrays["axes"] = np.asarray(expl._axes, dtype=str)
    display = expl.display_data
    if display is not None:
        arrays["display_data"] = display.astype(str) if display.dtype == object else display
    np.savez(file, **arrays)


def load(cls: type, file: Any) -> Any:
    """Read what :func:`save` wrote: arrays come back as JAX arrays, ``display_data`` as NumPy."""
    with np.load(file, allow_pickle=False) as z:
        get = lambda k: jnp.asarray(z[k]) if k in z.files else None  # noqa: E731
        names = z["feature_names"]
        outputs = z["output_names"] if "output_names" in z.files else None
        obj = cls(
            get("values"),
            get("base_values"),
            get("data"),
            get("stderr"),
            str(names) if names.ndim == 0 else [str(n) for n in names],
            None if outputs is None else (str(outputs) if outputs.ndim == 0 else [str(n) for n in outputs]),
            get("interaction_values"),
        )
        obj._axes = tuple(str(a) for a in z["axes"])
        if "display_data" in z.files:
            obj.display_data = z["display_data"]
    return obj
