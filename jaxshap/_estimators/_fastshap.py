r"""The FastSHAP objective, and training the explainer network on it: pure functions around one
optax loop.

An explainer network ``g(x; theta)`` with ``M K`` outputs is trained so that, for every row, its
(normalised) output is the weighted least-squares fit of the row's coalition values:

.. math::

    \mathcal L(\theta) = \mathbb E_{x}\, \mathbb E_{S \sim p}\,
        \bigl\| v_x(S) - v_x(\emptyset) - \textstyle\sum_{j \in S} \phi_j(x; \theta) \bigr\|^2,
    \qquad p(S) \propto \frac{M - 1}{\binom{M}{|S|} |S| (M - |S|)},

the Shapley kernel as a sampling distribution over ``0 < |S| < M``, whose minimiser for each ``x``
is the vector of Shapley values of the game ``v_x`` (Jethani, Sudarshan, Covert, Lee &
Ranganath, 2022, "FastSHAP: real-time Shapley value estimation", ICLR; Charnes et al. 1988 and
Lundberg & Lee 2017 for the weighted least-squares characterisation). Efficiency is enforced
exactly by the additive normalisation

.. math::

    \phi(x) = \tilde g(x) + \frac{1}{M}\Bigl(v_x(N) - v_x(\emptyset) - \textstyle\sum_j \tilde g_j(x)\Bigr),

which is the projection of the constrained least-squares problem, applied both in training and
when explaining. Coalitions are drawn in complementary pairs ``(S, N \ S)`` (paired sampling,
Covert & Lee, 2021), which lowers the variance of the gradient.

The value function is interventional, ``v_x(S) = mean_b f(x_S, b_{-S})`` over background rows;
in training it may be estimated from a random subset of the background per coalition: the
estimate is unbiased, so the expected loss differs from the exact one only by a constant and
has the same minimiser. ``v_x(\emptyset) = mean_b f(b)`` does not depend on ``x`` and
``v_x(N) = f(x)``, so both are exact.

Training. The network reads standardised rows and writes attributions in the model's units
(:func:`network_values`). Training minimises the objective with an optax optimizer:

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

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._coalitions._combinatorics import code_bits, shapley_kernels
from .._coalitions._kernel_sampling import Paired, smallest
from ._training import shuffled_batches, train_epochs


def shapley_size_logits(n_features: int) -> np.ndarray:
    """Log-probabilities of coalition sizes ``s = 1..M-1`` under the Shapley kernel.

    Summed over the ``C(M, s)`` coalitions of one size the kernel is ``(M - 1) / (s (M - s))``,
    the mass of KernelSHAP's paired design (:class:`jaxshap.coalitions.Paired`).
    """
    mass = np.array([Paired().size_mass(n_features, s) for s in range(1, n_features)], dtype=np.float64)
    return np.log(mass / mass.sum())


def sample_paired_masks(key: jax.Array, n_features: int, n_pairs: int) -> jax.Array:
    """``2 n_pairs`` coalitions ``[2 P, M]``: ``P`` draws from the Shapley kernel, then their complements.

    A size ``s`` is drawn with probability proportional to ``(M - 1) / (s (M - s))`` and then a
    uniform subset of that size (the ``s`` smallest of ``M`` uniform keys).
    """
    k_size, k_set = jax.random.split(key)
    sizes = 1 + jax.random.categorical(k_size, jnp.asarray(shapley_size_logits(n_features)), shape=(n_pairs,))
    masks = smallest(jax.random.uniform(k_set, (n_pairs, n_features)), sizes)
    return jnp.concatenate([masks, ~masks], axis=0)


def init_mlp(key: jax.Array, sizes: Sequence[int], dtype=jnp.float32) -> list[dict]:
    """Parameters of an MLP with layer widths ``sizes``; He-normal hidden layers, a zero output layer.

    The zero output layer makes the untrained explainer return the normalisation alone,
    ``(f(x) - E f) / M`` for every feature.
    """
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        last = i == len(sizes) - 2
        w = jnp.zeros((fan_in, fan_out), dtype) if last else jax.random.normal(k, (fan_in, fan_out), dtype) * np.sqrt(2.0 / fan_in)
        params.append({"w": w, "b": jnp.zeros((fan_out,), dtype)})
    return params


def apply_mlp(params: list[dict], z: jax.Array) -> jax.Array:
    """``[n, d_in] -> [n, d_out]``, GELU between layers."""
    for layer in params[:-1]:
        z = jax.nn.gelu(z @ layer["w"] + layer["b"])
    return z @ params[-1]["w"] + params[-1]["b"]


def normalise(raw: jax.Array, gap: jax.Array) -> jax.Array:
    """Additive efficient normalisation: ``raw [n, M, K]`` shifted so each row sums to ``gap [n, K]``."""
    m = raw.shape[1]
    return raw + ((gap - raw.sum(axis=1)) / m)[:, None, :]


def fastshap_loss(
    phi: jax.Array,
    x: jax.Array,
    masks: jax.Array,
    f: Callable[[jax.Array], jax.Array],
    background: jax.Array,
    base: jax.Array,
    bg_index: jax.Array,
    weights: jax.Array | None = None,
) -> jax.Array:
    """Mean squared residual of the coalition values of a batch of rows (the FastSHAP loss).

    Args:
      phi: normalised attributions ``[n, M, K]``.
      x: rows ``[n, M]``.
      masks: coalitions ``[n, C, M]`` (each row its own).
      f: model ``[..., M] -> [..., K]``.
      background: ``[B, M]``.
      base: ``v(emptyset) = mean_b f(b)``, ``[K]``.
      bg_index: background rows per coalition, ``[n, C, b]`` indices into ``background``.
      weights: probabilities of the coalitions ``[C]`` when they are enumerated rather than
        sampled (:func:`all_coalitions`); ``None`` weighs the sampled coalitions equally.

    Returns:
      The scalar loss: over rows and outputs, the mean of the (weighted) mean over coalitions
      of ``(v(S) - v0 - z_S . phi)^2``.
    """
    refs = background[bg_index]  # [n, C, b, M]
    inputs = jnp.where(masks[:, :, None, :], x[:, None, None, :], refs)
    values = jax.lax.stop_gradient(f(inputs).mean(axis=2))  # [n, C, K]
    fitted = jnp.einsum("ncm,nmk->nck", masks.astype(phi.dtype), phi)
    squares = (values - base - fitted) ** 2
    if weights is None:
        return squares.mean()
    return jnp.einsum("c,nck->", weights.astype(squares.dtype), squares) / (squares.shape[0] * squares.shape[2])


def all_coalitions(n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Every coalition with ``0 < |S| < M`` and its probability under the Shapley kernel.

    Returns ``(masks [2**M - 2, M] bool, probabilities [2**M - 2])``; training on all of them
    with these weights removes the coalition-sampling noise from the objective (small ``M``).
    """
    m = n_features
    masks = code_bits(np.arange(1, 2**m - 1), m)
    kernel = shapley_kernels(m)[masks.sum(1)]
    return masks, kernel / kernel.sum()


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
      optimizer: an optax transformation (for example :func:`._training.default_optimizer`).
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
