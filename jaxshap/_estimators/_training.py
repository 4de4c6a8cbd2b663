"""The optax training loop shared by jaxshap's learned models, and what the learned maskers add to
it: training options, the held-out split, the fit, scales.

FastSHAP (:mod:`jaxshap._estimators._fastshap`) and the learned maskers
(:class:`jaxshap.maskers.Surrogate`, :class:`jaxshap.maskers.Generative`) train the same way:

* an *epoch* shuffles the training rows and cuts them into whole minibatches
  (:func:`shuffled_batches`); one optimizer step per batch runs in a ``lax.scan``
  (:func:`make_epoch` for a plain objective);
* the default optimizer is Adam with a short warmup and a cosine decay (:func:`default_optimizer`);
* after every epoch a validation error is measured; the best parameters are kept and training
  stops after ``patience`` epochs without improvement (:func:`early_stop`, driven by
  :func:`train_epochs`).

The learned maskers train a network on random coalitions of their data with checked options
(:class:`Training`, :func:`check_training`), a held-out split for early stopping
(:func:`holdout`) and one fit (:func:`fit_network`).

Every function is pure: PRNG keys are explicit and sizes are static Python ints, so the same key
gives the same parameters.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import numpy as np
import optax

from .._coalitions._kernel_sampling import smallest
from .._core._validate import integer, number


def default_optimizer(learning_rate: float, steps: int) -> optax.GradientTransformation:
    """Adam with a linear warmup over the first 5 % of ``steps`` and a cosine decay to 1 % of the peak.

    Without a whole warmup step (fewer than 20 steps) the schedule is the cosine decay alone.
    """
    warmup = steps // 20
    if warmup:
        schedule = optax.warmup_cosine_decay_schedule(0.0, learning_rate, warmup, steps, end_value=0.01 * learning_rate)
    else:
        schedule = optax.cosine_decay_schedule(learning_rate, max(steps, 1), alpha=0.01)
    return optax.adam(schedule)


def shuffled_batches(key: jax.Array, rows: Any, batch_size: int) -> Any:
    """The rows (an array or a pytree of arrays with one leading row axis) shuffled into whole batches.

    Returns the same structure with leaves ``[n // batch_size, batch_size, ...]``; the remainder
    of ``n`` sits this epoch out.
    """
    n = jax.tree_util.tree_leaves(rows)[0].shape[0]
    n_batches = n // batch_size
    order = jax.random.permutation(key, n)[: n_batches * batch_size]
    return jax.tree_util.tree_map(lambda a: a[order].reshape((n_batches, batch_size) + a.shape[1:]), rows)


def uniform_size_masks(key: jax.Array, n: int, n_features: int) -> jax.Array:
    """``n`` random coalitions ``[n, M]``: a size uniform on ``0..M``, then a uniform subset of that size.

    This is the distribution of coalition sizes the Shapley value itself weighs by: in
    :math:`\\phi_j = \\frac1M \\sum_{s=0}^{M-1} \\binom{M-1}{s}^{-1} \\sum_{|S|=s} [v(S\\cup j) - v(S)]`
    every size has the same total weight, so a value function trained on these coalitions
    spends equal effort where the attribution puts equal weight.
    """
    k_size, k_set = jax.random.split(key)
    sizes = jax.random.randint(k_size, (n,), 0, n_features + 1)
    return smallest(jax.random.uniform(k_set, (n, n_features)), sizes)


def make_epoch(loss_fn: Callable, optimizer: optax.GradientTransformation, batch_size: int) -> Callable:
    """A jitted ``epoch(params, state, rows, key) -> (params, state, mean loss)`` for ``loss_fn(params, batch, key)``.

    ``rows`` is an array or a pytree of arrays with one leading row axis; every batch gets its
    own key (a fold of the epoch's).
    """

    def step(carry, inputs):
        params, state = carry
        batch, key = inputs
        loss, grads = jax.value_and_grad(loss_fn)(params, batch, key)
        updates, state = optimizer.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), loss

    def epoch(params, state, rows, key):
        k_perm, k_steps = jax.random.split(key)
        batches = shuffled_batches(k_perm, rows, batch_size)
        n_batches = jax.tree_util.tree_leaves(batches)[0].shape[0]
        (params, state), losses = jax.lax.scan(step, (params, state), (batches, jax.random.split(k_steps, n_batches)))
        return params, state, losses.mean()

    return jax.jit(epoch)


@functools.lru_cache(maxsize=16)
def default_epoch(loss_fn: Callable, learning_rate: float, steps: int,
                  batch_size: int) -> tuple[Callable, optax.GradientTransformation]:
    """``(epoch, optimizer)``: :func:`make_epoch` with :func:`default_optimizer`, one jitted function
    per ``(loss_fn, learning_rate, steps, batch_size)``: models trained alike (the folds of a
    cross-fit, a refit) share its compiled program instead of compiling their own. ``loss_fn`` is
    compared by equality: a module-level function, or a frozen dataclass of hashable settings."""
    optimizer = default_optimizer(learning_rate, steps)
    return make_epoch(loss_fn, optimizer, batch_size), optimizer


@functools.lru_cache(maxsize=16)
def jitted(fn: Callable) -> Callable:
    """``jax.jit(fn)``, the same jitted function for equal ``fn`` (see :func:`default_epoch`)."""
    return jax.jit(fn)


class Stopping(NamedTuple):
    """Early stopping's state: the best validation error, its parameters, epochs since it."""

    best: float
    params: Any
    waited: int


def early_stop(state: Stopping, error: float, params: Any, patience: int) -> tuple[Stopping, bool]:
    """Record one epoch's validation ``error``: ``(new state, stop now)``.

    A strictly lower error becomes the best (with its ``params``); otherwise the wait grows, and
    training stops once it reaches ``patience``.
    """
    if error < state.best:
        return Stopping(error, params, 0), False
    waited = state.waited + 1
    return state._replace(waited=waited), waited >= patience


def train_epochs(
    epoch_fn: Callable[[Any, jax.Array], tuple[Any, Any]],
    error_fn: Callable[[Any], Any],
    state: Any,
    key: jax.Array,
    epochs: int,
    patience: int,
    params_of: Callable[[Any], Any] = lambda state: state[0],
    on_epoch: Callable[[], None] | None = None,
) -> tuple[Any, dict[str, list[float]]]:
    """Run epochs with early stopping; returns ``(best params, history)``.

    Args:
      epoch_fn: ``(state, key) -> (state, mean training loss)``; epoch ``e`` gets
        ``fold_in(key, e)``.
      error_fn: validation error of parameters (lower is better).
      state: the training state the epochs carry (parameters, optimizer state, ...).
      key: PRNG key of the epochs.
      epochs: most epochs.
      patience: epochs without a strictly lower validation error before stopping.
      params_of: the parameters that are validated and kept, read from the state.
      on_epoch: called after each epoch (a progress bar).

    Returns:
      The parameters of the epoch with the lowest validation error, and ``history`` with, per
      epoch run, ``"loss"`` and ``"validation_error"``.

    Raises:
      FloatingPointError: when the validation error is not finite (training diverged).
    """
    stopping = Stopping(math.inf, params_of(state), 0)
    history = {"loss": [], "validation_error": []}
    for e in range(epochs):
        state, loss = epoch_fn(state, jax.random.fold_in(key, e))
        err = float(error_fn(params_of(state)))
        history["loss"].append(float(loss))
        history["validation_error"].append(err)
        if on_epoch is not None:
            on_epoch()
        if not math.isfinite(err):
            raise FloatingPointError(f"training diverged at epoch {e} (validation error {err}); lower `learning_rate`.")
        stopping, stop = early_stop(stopping, err, params_of(state), patience)
        if stop:
            break
    return stopping.params, history


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


def silverman_factor(n_rows: int, n_features: int) -> float:
    """Silverman's normal-reference bandwidth, in units of each feature's spread.

    ``h = (4 / (d + 2))**(1 / (d + 4)) * n**(-1 / (d + 4))`` for ``n`` rows of ``d`` features
    (Silverman, 1986, "Density estimation for statistics and data analysis", eq. 4.14): the
    bandwidth of a Gaussian product kernel density estimate that minimises the mean integrated
    squared error when the data are normal. About 0.5 for 8 features, 0.64 for 16 and 0.76 for 32
    at 2000 rows.
    """
    d, n = n_features, max(n_rows, 1)
    return float((4.0 / (d + 2)) ** (1.0 / (d + 4)) * n ** (-1.0 / (d + 4)))


def cost_text(history: dict | None, steps_per_epoch: int, batch: int) -> str:
    """``"E epochs x S steps x B rows"`` of a training record (``"untrained"`` without one)."""
    if not history:
        return "untrained"
    e = len(history["loss"])
    return f"{e} epochs x {steps_per_epoch} steps x {batch} rows = {e * steps_per_epoch * batch} masked rows"
