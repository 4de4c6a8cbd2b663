r"""Training the FastSHAP explainer network: pure functions around one optax loop.

The network ``g(x; theta)`` of :mod:`jaxshap._estimators._fastshap` reads standardised rows and
writes attributions in the model's units (:func:`network_values`). Training minimises the
FastSHAP objective (Jethani et al., 2022, ICLR) with an optax optimizer:

* an *epoch* (:func:`make_epoch`) shuffles the training rows, and for each batch draws fresh
  coalitions (complementary pairs from the Shapley kernel, or every coalition with its kernel
  probability when ``2**M - 2 <= n_coalitions``) and background rows, optionally jitters the
  rows (a smoothed bootstrap), and takes one optimizer step; the steps run in one ``lax.scan``;
* after every step the parameters' exponential moving average (Polyak averaging) is updated
  with the decay :math:`\min(a, (1 + t) / (10 + t))`, so early iterates fade fast;
* after every epoch the average is scored on held-out rows by the relative error
  :math:`\|\phi - \phi_{\mathrm{ref}}\|_F / \|\phi_{\mathrm{ref}}\|_F`; the best average is
  kept and training stops after ``patience`` epochs without improvement (the shared loop of
  :mod:`jaxshap._estimators._training`).

Every function is pure: PRNG keys are explicit, sizes are static Python ints in
:class:`TrainingConfig`, and the same key gives the same parameters.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ._fastshap import all_coalitions, apply_mlp, fastshap_loss, init_mlp, normalise, sample_paired_masks
from ._training import Stopping, default_optimizer, early_stop, shuffled_batches, train_epochs

__all__ = [
    "Scaling", "Stopping", "TrainingConfig", "default_optimizer", "early_stop", "init_network", "make_epoch",
    "make_loss", "make_step", "network_values", "train_amortized",
]


class TrainingConfig(NamedTuple):
    """Static sizes and constants of one training run (Python scalars: part of the compiled program).

    Attributes:
      n_features: ``M``.
      n_outputs: ``K``.
      hidden: widths of the network's hidden layers.
      n_coalitions: coalitions per row and step, an even number (pairs).
      background_samples: background rows averaged per coalition (at most ``B``; ``B``: all).
      averaging: decay ``a`` of the parameters' moving average, in ``[0, 1)``.
      batch_size: rows per optimizer step (at most the number of training rows).
      epochs: most epochs.
      patience: epochs without a better validation error before stopping.
      jitter: standard deviation of the rows' Gaussian jitter, in units of ``x_scale``.
    """

    n_features: int
    n_outputs: int
    hidden: tuple[int, ...]
    n_coalitions: int
    background_samples: int
    averaging: float
    batch_size: int
    epochs: int
    patience: int
    jitter: float


class Scaling(NamedTuple):
    """The network's input and output scales, from the background (a pytree of arrays).

    Attributes:
      base: ``E f``, the mean model output over the background, ``[K]``.
      x_mean, x_scale: the background's column means and spreads, ``[M]``.
      y_scale: the spread of the model's outputs over the background, ``[K]``.
    """

    base: jax.Array
    x_mean: jax.Array
    x_scale: jax.Array
    y_scale: jax.Array


def network_values(params: list[dict], scaling: Scaling, x: jax.Array, fx: jax.Array) -> jax.Array:
    r"""Efficient attributions ``[n, M, K]`` of rows ``x`` with model outputs ``fx`` ``[n, K]``.

    :math:`\tilde g = \mathrm{MLP}((x - \bar x) / s_x) \odot s_y` reshaped to ``[n, M, K]``, then
    :math:`\phi = \tilde g + (f(x) - E f - \sum_j \tilde g_j) / M` (:func:`normalise`).
    """
    n, m = x.shape
    k = scaling.base.shape[0]
    raw = apply_mlp(params, (x - scaling.x_mean) / scaling.x_scale).reshape(n, m, k) * scaling.y_scale
    return normalise(raw, fx - scaling.base)


def init_network(key: jax.Array, config: TrainingConfig, dtype: Any) -> list[dict]:
    """The untrained network: ``M`` inputs, ``config.hidden``, ``M K`` outputs (:func:`init_mlp`)."""
    m, k = config.n_features, config.n_outputs
    return init_mlp(key, (m,) + tuple(config.hidden) + (m * k,), dtype)


def make_loss(config: TrainingConfig, model_fn: Callable, background: jax.Array, scaling: Scaling) -> Callable:
    """``loss(params, x, key)``: the FastSHAP objective of a batch, in units of the output variance.

    Each row gets its own coalitions (``n_coalitions / 2`` complementary pairs from the Shapley
    kernel, or every coalition weighted by its kernel probability when there are no more than
    ``n_coalitions``) and, per coalition, ``background_samples`` background rows drawn with
    replacement (all of them, in order, when that is the whole background).
    """
    m, n_bg = config.n_features, background.shape[0]
    n_s, n_c = config.background_samples, config.n_coalitions
    enumerate_all = 2**m - 2 <= n_c
    if enumerate_all:  # every coalition, weighted: no coalition-sampling noise
        every, probabilities = all_coalitions(m)
        n_c, weights = every.shape[0], jnp.asarray(probabilities, scaling.base.dtype)

    def loss_fn(params, x, key):
        k_mask, k_bg = jax.random.split(key)
        if enumerate_all:
            masks = jnp.broadcast_to(jnp.asarray(every), (x.shape[0],) + every.shape)
        else:
            masks = jax.vmap(lambda k: sample_paired_masks(k, m, n_c // 2))(jax.random.split(k_mask, x.shape[0]))
        if n_s >= n_bg:
            index = jnp.broadcast_to(jnp.arange(n_bg), (x.shape[0], n_c, n_bg))
        else:
            index = jax.random.randint(k_bg, (x.shape[0], n_c, n_s), 0, n_bg)
        phi = network_values(params, scaling, x, model_fn(x))
        loss = fastshap_loss(phi, x, masks, model_fn, background, scaling.base, index, weights if enumerate_all else None)
        return loss / jnp.mean(scaling.y_scale**2)

    return loss_fn


def make_step(config: TrainingConfig, loss_fn: Callable, optimizer: optax.GradientTransformation,
              x_scale: jax.Array) -> Callable:
    """``step((params, average, state, count), (x, key)) -> (carry, loss)``: one optimizer step.

    With ``jitter > 0`` the batch is first moved by fresh noise ``jitter * x_scale * N(0, 1)``
    (a draw from a Gaussian kernel density estimate of the rows). After the update the moving
    average moves toward the new parameters with decay ``min(averaging, (1 + t) / (10 + t))``.
    """
    jitter, averaging = config.jitter, config.averaging

    def step(carry, inputs):
        params, average, state, count = carry
        x, key = inputs
        if jitter > 0:
            key, k_jitter = jax.random.split(key)
            x = x + (jitter * x_scale) * jax.random.normal(k_jitter, x.shape, x.dtype)
        loss, grads = jax.value_and_grad(loss_fn)(params, x, key)
        updates, state = optimizer.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        decay = jnp.minimum(averaging, (1.0 + count) / (10.0 + count))
        average = jax.tree_util.tree_map(lambda a, p: a + (1.0 - decay) * (p - a), average, params)
        return (params, average, state, count + 1), loss

    return step


def make_epoch(config: TrainingConfig, model_fn: Callable, background: jax.Array, scaling: Scaling,
               optimizer: optax.GradientTransformation) -> Callable:
    """A jitted ``epoch(params, average, state, count, rows, key) -> (..., mean loss)``.

    The rows are shuffled and cut into ``len(rows) // batch_size`` whole batches (the remainder
    sits the epoch out); one :func:`make_step` per batch runs in a ``lax.scan``.
    """
    step = make_step(config, make_loss(config, model_fn, background, scaling), optimizer, scaling.x_scale)
    batch_size = config.batch_size

    def epoch(params, average, state, count, rows, key):
        k_perm, k_steps = jax.random.split(key)
        batches = shuffled_batches(k_perm, rows, batch_size)
        keys = jax.random.split(k_steps, batches.shape[0])
        (params, average, state, count), losses = jax.lax.scan(step, (params, average, state, count), (batches, keys))
        return params, average, state, count, losses.mean()

    return jax.jit(epoch)


def train_amortized(
    init_key: jax.Array,
    train_key: jax.Array,
    config: TrainingConfig,
    model_fn: Callable,
    background: jax.Array,
    scaling: Scaling,
    rows: jax.Array,
    validation: tuple[jax.Array, jax.Array],
    optimizer: optax.GradientTransformation,
    on_epoch: Callable[[int], None] | None = None,
) -> tuple[list[dict], dict[str, list[float]]]:
    """Train the explainer network; returns ``(params, history)``.

    Args:
      init_key: PRNG key of the network's initial parameters.
      train_key: PRNG key of the epochs (epoch ``e`` uses ``fold_in(train_key, e)``).
      config: sizes and constants (:class:`TrainingConfig`).
      model_fn: the model ``[..., M] -> [..., K]`` (JAX-traceable).
      background: background rows ``[B, M]``.
      scaling: the network's scales (:class:`Scaling`).
      rows: training rows ``[n, M]``, ``n >= batch_size``.
      validation: held-out rows ``[v, M]`` and their reference values ``[v, M, K]``.
      optimizer: an optax transformation (for example :func:`default_optimizer`).
      on_epoch: called with the number of rows trained on after each epoch (a progress bar).

    Returns:
      ``params``, the moving average at the epoch of the lowest validation error, and
      ``history`` with, per epoch run, ``"loss"`` (training objective) and ``"validation_error"``;
      the kept parameters' error is ``min(history["validation_error"])``.

    Raises:
      FloatingPointError: when the validation error is not finite (training diverged).
    """
    X_val, ref = validation
    ref_norm = float(jnp.sqrt((ref**2).sum()))
    ref_norm = ref_norm if ref_norm > 0 else 1.0
    dtype = scaling.base.dtype
    params = init_network(init_key, config, dtype)
    state = optimizer.init(params)
    average, count = params, jnp.zeros((), dtype)
    epoch_fn = make_epoch(config, model_fn, background, scaling, optimizer)
    fx_val = model_fn(X_val)
    val_phi = jax.jit(lambda p: network_values(p, scaling, X_val, fx_val))

    def run_epoch(state, key):
        *state, loss = epoch_fn(*state, rows, key)
        return tuple(state), loss

    def error(average):
        return jnp.sqrt(((val_phi(average) - ref) ** 2).sum()) / ref_norm

    progress = None if on_epoch is None else (lambda: on_epoch(rows.shape[0]))
    return train_epochs(run_epoch, error, (params, average, state, count), train_key, config.epochs, config.patience,
                        params_of=lambda s: s[1], on_epoch=progress)
