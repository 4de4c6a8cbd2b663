"""Find the registered reader of a tree model and read the model into a :class:`TreeEnsemble`."""

from __future__ import annotations

from typing import Any

from ._ensemble import TreeEnsemble
from ._reader import TreeReader, readers


def reader_for(model: Any) -> TreeReader | None:
    """The first registered reader (the most recently registered first) that recognises
    ``model``, or ``None``."""
    for reader in readers():
        if reader.recognises(model):
            return reader
    return None


def supported() -> str:
    """The models the registered readers read, in words, in the order they were registered."""
    return "; ".join(r.formats or type(r).__name__ for r in reversed(readers()))


def find_reader(model: Any) -> TreeReader:
    """The reader of ``model``.

    Raises:
      TypeError: when no registered reader recognises it (the message lists the supported models).
    """
    reader = reader_for(model)
    if reader is None:
        cls = type(model)
        raise TypeError(
            f"TreeExplainer cannot read a model of type {cls.__module__}.{cls.__name__}. Supported models: "
            f"{supported()}. For any other model use jaxshap.ExactExplainer, PermutationExplainer or "
            "KernelExplainer; or read it with a jaxshap.trees.TreeReader."
        )
    return reader


def import_model(model: Any) -> TreeEnsemble:
    """Convert a fitted tree model into a :class:`TreeEnsemble` with its registered reader.

    Raises:
      TypeError: for a model no registered reader recognises (the message lists the supported ones).
      ValueError: for an unfitted model.
    """
    return find_reader(model).read(model)
