"""What the learned maskers share: training options, the held-out split, the fit loop, scales.

:class:`jaxshap.maskers.Surrogate` and :class:`jaxshap.maskers.Generative` train a network with
optax on random coalitions of their data, using the loop of
:mod:`jaxshap._estimators._training` (shuffled minibatches, one compiled scan per epoch, Adam with
warmup and cosine decay, early stopping on a held-out split).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from .._core._validate import integer, number
from .._estimators._training import default_epoch, jitted, train_epochs


class Training(NamedTuple):
    """Checked training options (Python scalars).

    Attributes:
      epochs: most passes over the training rows.
      batch_size: rows per optimizer step (capped at the training rows).
      learning_rate: peak learning rate of Adam (warmup, then cosine decay).
      patience: epochs without a lower validation loss before stopping.
      validation_fraction: share of the rows held out for early stopping.
    """

    epochs: int
    batch_size: int
    learning_rate: float
    patience: int
    validation_fraction: float


def check_training(epochs, batch_size, learning_rate, patience, validation_fraction) -> Training:
    """The options checked (``ValueError`` naming the argument otherwise)."""
    return Training(
        integer(epochs, "epochs", least=1),
        integer(batch_size, "batch_size", least=1),
        number(learning_rate, "learning_rate", above=0.0, rule="a positive number"),
        integer(patience, "patience", least=1),
        number(validation_fraction, "validation_fraction", above=0.0, below=1.0, rule="a fraction in (0, 1)"),
    )


def holdout(key: jax.Array, n_rows: int, fraction: float) -> tuple[jax.Array, jax.Array]:
    """``(training indices, validation indices)``: ``round(fraction n)`` rows (at least one) held out.

    Raises:
      ValueError: when fewer than two rows would remain to train on.
    """
    n_val = max(1, int(round(fraction * n_rows)))
    if n_rows - n_val < 2:
        raise ValueError(f"`data` has {n_rows} rows: too few to hold out {n_val} for validation and train on the rest.")
    order = jax.random.permutation(key, n_rows)
    return order[n_val:], order[:n_val]


def fit_network(loss_fn: Callable, error_fn: Callable, params: Any, rows: Any, held: Any, key: jax.Array,
                options: Training) -> tuple[Any, dict[str, list[float]], int]:
    """Train ``params`` on ``loss_fn(params, batch, key)`` with early stopping on ``error_fn(params, held)``.

    Both functions are compared by equality (module-level functions or frozen dataclasses), so
    networks trained alike on rows of the same shapes share their compiled programs
    (:func:`jaxshap._estimators._training.default_epoch`). Returns ``(best params, history,
    batch size used)``; the steps taken are ``len(history["loss"]) * (n // batch)``.
    """
    n = jax.tree_util.tree_leaves(rows)[0].shape[0]
    batch = min(options.batch_size, n)
    steps = options.epochs * (n // batch)
    epoch, optimizer = default_epoch(loss_fn, options.learning_rate, steps, batch)
    error = jitted(error_fn)

    def run(state, k):
        p, s, loss = epoch(*state, rows, k)
        return (p, s), loss

    state = (params, optimizer.init(params))
    best, history = train_epochs(run, lambda p: error(p, held), state, key, options.epochs, options.patience)
    return best, history, batch


def spread(a: np.ndarray) -> np.ndarray:
    """Column standard deviations, with constant columns (and a zero overall spread) mapped to 1."""
    std = a.std(axis=0)
    floor = 1e-6 * max(float(np.abs(a).max()), 1.0)
    return np.where(std > floor, std, 1.0)


def cost_text(history: dict | None, steps_per_epoch: int, batch: int) -> str:
    """``"E epochs x S steps x B rows"`` of a training record (``"untrained"`` without one)."""
    if not history:
        return "untrained"
    e = len(history["loss"])
    return f"{e} epochs x {steps_per_epoch} steps x {batch} rows = {e * steps_per_epoch * batch} masked rows"
