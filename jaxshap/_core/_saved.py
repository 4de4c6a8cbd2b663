"""The saved form of a trained object: one NumPy ``.npz`` file of arrays and a JSON ``config``.

Trained networks (``AmortizedExplainer``, the learned maskers) are saved as their arrays plus a
JSON ``config`` entry naming the saved ``kind`` and its ``format_version``; nothing is pickled,
so loading runs no code from the file (``np.load(..., allow_pickle=False)``). A network, a list
of ``{"w", "b"}`` layers, is stored as ``{prefix}{i}_w`` and ``{prefix}{i}_b``.
"""

from __future__ import annotations

import json
from typing import Any

import jax.numpy as jnp
import numpy as np


def write_saved(path: str, config: dict, arrays: dict[str, Any]) -> None:
    """Write ``arrays`` and the JSON-serialisable ``config`` to ``path``."""
    with open(path, "wb") as fh:
        np.savez(fh, config=np.array(json.dumps(config)), **{k: np.asarray(v) for k, v in arrays.items()})


def read_saved(path: str, kind: str, version: int) -> tuple[dict, dict[str, np.ndarray]]:
    """``(config, arrays)`` of a file written by :func:`write_saved` for a ``kind`` at ``version``.

    Raises:
      ValueError: when the file is not a saved ``kind`` (no ``config``, another ``kind``) or has
        another format version.
    """
    with np.load(path, allow_pickle=False) as files:
        if "config" not in files:
            raise ValueError(f"{path!r} is not a saved {kind} (no `config` entry).")
        config = json.loads(str(files["config"]))
        arrays = {k: files[k] for k in files.files if k != "config"}
    found = config.get("kind", kind)
    if found != kind:
        raise ValueError(f"{path!r} is not a saved {kind}: it holds a {found}; load it with {found}.load.")
    if config.get("format_version") != version:
        raise ValueError(f"{path!r} has format version {config.get('format_version')}; this jaxshap reads {version}.")
    return config, arrays


def network_arrays(params: list[dict], prefix: str = "layer") -> dict[str, Any]:
    """A network's layers as named arrays: ``{prefix}{i}_w`` and ``{prefix}{i}_b``."""
    arrays = {}
    for i, layer in enumerate(params):
        arrays[f"{prefix}{i}_w"], arrays[f"{prefix}{i}_b"] = layer["w"], layer["b"]
    return arrays


def network_from_arrays(arrays: dict[str, np.ndarray], n_layers: int, prefix: str = "layer") -> list[dict]:
    """The network :func:`network_arrays` saved, as JAX arrays."""
    return [
        {"w": jnp.asarray(arrays[f"{prefix}{i}_w"]), "b": jnp.asarray(arrays[f"{prefix}{i}_b"])} for i in range(n_layers)
    ]
