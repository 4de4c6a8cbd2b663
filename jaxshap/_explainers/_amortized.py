"""``AmortizedExplainer``: FastSHAP, an explainer network trained with optax.

Training costs model evaluations once (coalition values of the training rows); afterwards a
row's Shapley values cost one pass of a small network plus one model evaluation (for the exact
efficiency normalisation), whatever the number of features.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._estimators._exact import exact_shapley
from .._estimators._fastshap import all_coalitions, apply_mlp, fastshap_loss, init_mlp, normalise, sample_paired_masks
from .._estimators._kernel import kernel_shapley
from .._result._explanation import Explanation
from .._core._chunking import map_chunks, plan_chunks
from .._core._validate import DEFAULT_MEMORY_BUDGET
from .._engine._explainer import drop_output_axis
from .._core._inputs import (
    as_key,
    as_matrix,
    check_finite,
    check_n_features,
    resolve_feature_names,
)
from .._core._model import wrap_model
from .._core._progress import ProgressBar, wants_progress
from .._engine._rows import RowExplainer
from ..maskers import Independent
from ._gradient import reject_weights

FORMAT_VERSION = 1
"""Version of the saved file layout (``.npz`` arrays plus a JSON ``config``)."""

EXACT_REFERENCE_FEATURES = 10
"""Up to this many features the validation rows are explained exactly (2**M coalitions), above
with KernelSHAP at its default budget."""

EXPLAIN_ROWS_PER_CHUNK = 8192
"""Most rows per chunk of the explaining pass (network and model); fewer when the activations
of that many rows exceed the chunk's memory (``memory_budget``, capped on a CPU)."""


EXPLAIN_FIELDS = ("n_features", "model", "_dtype", "base", "x_mean", "x_scale", "y_scale", "params")
"""The attributes the explaining pass reads (the compiled program's argument, see ``_core``)."""


def _positive_int(value: Any, name: str, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"`{name}` must be an integer of at least {least}; got {value!r}.")
    return int(value)


def default_hidden(n_features: int) -> tuple[int, ...]:
    """The explainer network's default widths: ``(128, 128)`` up to 8 features, else ``(256, 256)``.

    Measured on the ``amortized`` bench (tanh MLP(64), 2000 training rows): at 8 features the
    smaller network reached the same error (0.037 against 0.038) at about 3x the throughput, so
    that explaining beats KernelExplainer at equal error by about 300x instead of 70x to 110x;
    at 16 features it was less accurate (0.096 against 0.086).
    """
    return (128, 128) if n_features <= 8 else (256, 256)


def _check_hidden(hidden: Any) -> tuple[int, ...]:
    if isinstance(hidden, (int, np.integer)) and not isinstance(hidden, bool):
        hidden = (hidden,)
    try:
        hidden = tuple(_positive_int(h, "hidden") for h in hidden)
    except TypeError as err:
        raise ValueError(f"`hidden` must be a sequence of layer widths such as (256, 256); got {hidden!r}.") from err
    return hidden


class AmortizedExplainer(RowExplainer):
    r"""FastSHAP: a network trained to output interventional Shapley values in one forward pass.

    An MLP ``g(x; theta)`` (inputs standardised with the background's mean and spread, outputs
    scaled by the spread of the model's output) is trained with optax on the FastSHAP objective
    (Jethani et al., 2022, "FastSHAP: real-time Shapley value estimation", ICLR)

    .. math::

        \min_\theta\ \mathbb E_x\, \mathbb E_{S \sim p_{\mathrm{Shapley}}}
            \bigl\| v_x(S) - v_x(\emptyset) - \textstyle\sum_{j \in S} \phi_j(x; \theta)\bigr\|^2,

    over coalitions drawn from the Shapley kernel in complementary pairs, with the interventional
    value function ``v_x(S) = mean_b f(x_S, b_{-S})`` of the background, and the additive
    normalisation ``phi = g + (f(x) - E f - sum_j g_j) / M`` that makes efficiency hold exactly
    (see :mod:`jaxshap._estimators._fastshap`). Its minimiser, row by row, is the Shapley values;
    how close the trained network comes is measured on held-out rows against exact (``M <= 10``)
    or KernelSHAP values, used for early stopping and reported as ``validation_error_``.

    Cost. Training evaluates the model on ``epochs * n_train * n_coalitions * background_samples``
    rows (60 epochs of 1800 rows, 64 coalitions of 16 background rows: 110 M evaluations, 20 to
    70 s for an MLP(64) with 8 to 32 features on a 2-core CPU); explaining then costs one network
    pass plus one model evaluation per row (300,000 to 840,000 rows/s there with the default
    network). KernelExplainer instead spends ``(n_coalitions + 2) * B`` model evaluations per
    row, and the coalitions it needs for a given error grow with the number of features, so the
    amortized explainer pays most for many rows of many features. ``bench/scenarios/amortized.py``
    measured relative errors of 3.8 % (8 features), 8.0 % (16) and 12.8 % (32) after 60 epochs
    on 2000 rows; the cheapest KernelSHAP at least as accurate (32, 64 and 66 coalitions) ran
    69x to 110x, 210x to 270x and 260x to 360x slower (290x to 300x at 8 features with a
    (128, 128) network, as accurate there), so training paid for itself after 80,000 to 160,000
    rows. The values are an approximation whose error is set by training and does not shrink at
    explain time: check ``validation_error_`` (relative Frobenius error on the held-out rows)
    before trusting the values, train longer or on more rows to lower it, and retrain when the
    data shift.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX, or a NumPy callable evaluated on the
        host, slower to train on).
      background: background rows ``[B, M]`` (array or DataFrame; more than 100 rows are
        subsampled with a warning, as every masker does) or an unweighted
        :class:`jaxshap.maskers.Independent` masker.
      hidden: widths of the explainer network's hidden layers, or ``"auto"`` (default):
        :func:`default_hidden`, ``(128, 128)`` up to 8 features and ``(256, 256)`` above.
      n_coalitions: coalitions per training row and step, an even number (pairs), default 64.
        When ``2**M - 2 <= n_coalitions`` every coalition is used instead, weighted by the
        Shapley kernel, which removes the sampling noise (``M <= 5`` at the default). At the
        same cost per step, 64 coalitions of 16 background rows (the defaults) had lower error
        than 32 of 32 on the ``amortized`` bench (0.087 against 0.101 at 16 features, 0.137
        against 0.146 at 32).
      background_samples: background rows averaged per coalition in training (a fresh random
        subset each time; unbiased); ``None`` uses them all. Default 16.
      averaging: decay of the exponential moving average of the parameters (Polyak averaging)
        that is validated and kept, default 0.99 (a horizon of about 100 steps); it averages out
        the noise of the sampled objective. 0 keeps the raw iterates.
      feature_names: optional names of the ``M`` features.
      memory_budget: bytes of working memory for computing the validation reference values and
        for one chunk of explained rows.

    Explaining runs on the shared runtime (:class:`jaxshap._engine._rows.RowExplainer`), as for
    every explainer: ``progress=``, ``devices=`` and :meth:`explain_batches`, rows padded to a
    few capacities, and one compiled program for every explainer with the same configuration
    (a retrained or loaded network of the same shapes does not recompile). The explainer is a
    pytree whose leaves include the network's parameters ``params``.

    Example::

        ex = jaxshap.AmortizedExplainer(model, background).fit(X_train, key=jax.random.key(0))
        ex.validation_error_            # e.g. 0.03: 3 % relative error on held-out rows
        expl = ex(X)                    # one jitted pass; expl.values [n, M]
        ex.save("explainer.npz"); ex = jaxshap.AmortizedExplainer.load("explainer.npz", model)

    Attributes (after :meth:`fit`):
      params: the network's parameters (a list of ``{"w", "b"}`` dicts).
      history_: per epoch, ``"loss"`` (training objective, in units of the output variance) and
        ``"validation_error"``.
      validation_error_: relative error ``||phi - phi_ref||_F / ||phi_ref||_F`` on the held-out
        rows at the kept (best) epoch.
      fit_seconds_: wall time of :meth:`fit`, reference values included.
    """

    def __init__(
        self,
        model: Callable,
        background: Any,
        *,
        hidden: Sequence[int] | str = "auto",
        n_coalitions: int = 64,
        background_samples: int | None = 16,
        averaging: float = 0.99,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        if background is None:
            raise ValueError("`background` is required: pass background rows [B, M] (for example 100 training rows).")
        masker = background if isinstance(background, Independent) else Independent(background)
        reject_weights(masker, "AmortizedExplainer")
        self.masker = masker
        self.n_features = masker.n_features
        self.hidden = default_hidden(self.n_features) if isinstance(hidden, str) and hidden == "auto" else _check_hidden(hidden)
        n_coalitions = _positive_int(n_coalitions, "n_coalitions", 2)
        if n_coalitions % 2:
            raise ValueError(f"`n_coalitions` must be even (coalitions come in complementary pairs); got {n_coalitions}.")
        self.n_coalitions = n_coalitions
        if isinstance(averaging, bool) or not isinstance(averaging, (int, float)) or not 0 <= averaging < 1:
            raise ValueError(f"`averaging` must be a number in [0, 1) (an exponential moving-average decay); got {averaging!r}.")
        self.averaging = float(averaging)
        n_bg = masker.data.shape[0]
        if background_samples is None:
            background_samples = n_bg
        self.background_samples = min(_positive_int(background_samples, "background_samples"), n_bg)
        if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, np.integer)) or memory_budget <= 0:
            raise ValueError(f"`memory_budget` must be a positive number of bytes; got {memory_budget!r}.")
        self.memory_budget = int(memory_budget)
        self._names = feature_names
        self._bg_names = masker.feature_names
        dtype = masker.dtype
        self.model = wrap_model(model, self.n_features, dtype, masker.data)
        self._dtype = dtype
        data = np.asarray(masker.data, np.float64)
        outputs = np.asarray(self.model.fn(masker.data), np.float64)  # [B, K]
        self._set_statistics(
            base=outputs.mean(0),
            x_mean=data.mean(0),
            x_scale=_spread(data),
            y_scale=_spread(outputs),
        )
        self.params = None
        self.history_ = None
        self.validation_error_ = None
        self.fit_seconds_ = None

    def _set_statistics(self, base, x_mean, x_scale, y_scale) -> None:
        to = lambda a: jnp.asarray(a, self._dtype)
        self.base, self.x_mean, self.x_scale, self.y_scale = to(base), to(x_mean), to(x_scale), to(y_scale)

    # --- the network --------------------------------------------------------------------------
    def _raw(self, params, X):
        """Un-normalised attributions ``[n, M, K]`` in the model's units."""
        m, k = self.n_features, self.model.n_outputs
        out = apply_mlp(params, (X - self.x_mean) / self.x_scale)
        return out.reshape(X.shape[0], m, k) * self.y_scale

    def _phi(self, params, X, fx):
        return normalise(self._raw(params, X), fx - self.base)

    # --- training -----------------------------------------------------------------------------
    def _make_epoch(self, optimizer, batch_size: int, jitter: float = 0.0):
        f, m = self.model.fn, self.n_features
        data = self.masker.data
        n_bg, n_s, n_c = data.shape[0], self.background_samples, self.n_coalitions

        enumerate_all = 2**m - 2 <= n_c
        if enumerate_all:  # every coalition, weighted: no coalition-sampling noise
            every, probabilities = all_coalitions(m)
            n_c, weights = every.shape[0], jnp.asarray(probabilities, self._dtype)

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
            phi = self._phi(params, x, f(x))
            loss = fastshap_loss(phi, x, masks, f, data, self.base, index, weights if enumerate_all else None)
            return loss / jnp.mean(self.y_scale**2)

        def step(carry, inputs):
            params, average, state, count = carry
            x, key = inputs
            if jitter > 0:  # a fresh smoothed-bootstrap draw of the batch (see `fit`)
                key, k_jitter = jax.random.split(key)
                x = x + (jitter * self.x_scale) * jax.random.normal(k_jitter, x.shape, x.dtype)
            loss, grads = jax.value_and_grad(loss_fn)(params, x, key)
            updates, state = optimizer.update(grads, state, params)
            params = optax.apply_updates(params, updates)
            # the decay ramps up as min(averaging, (1 + t) / (10 + t)) so early iterates fade fast
            decay = jnp.minimum(self.averaging, (1.0 + count) / (10.0 + count))
            average = jax.tree_util.tree_map(lambda a, p: a + (1.0 - decay) * (p - a), average, params)
            return (params, average, state, count + 1), loss

        def epoch(params, average, state, count, X_train, key):
            k_perm, k_steps = jax.random.split(key)
            n_batches = X_train.shape[0] // batch_size
            order = jax.random.permutation(k_perm, X_train.shape[0])[: n_batches * batch_size]
            batches = X_train[order].reshape(n_batches, batch_size, m)
            keys = jax.random.split(k_steps, n_batches)
            (params, average, state, count), losses = jax.lax.scan(
                step, (params, average, state, count), (batches, keys)
            )
            return params, average, state, count, losses.mean()

        return jax.jit(epoch)

    def _reference(self, X: jax.Array, key: jax.Array, method: str) -> jax.Array:
        """Shapley values ``[n, M, K]`` of validation rows: exact, or KernelSHAP at its default budget."""
        f, masker, m = self.model.fn, self.masker, self.n_features
        coalitions = 2**m if method == "exact" else min(2 * m + 2048, 2**m - 2) + 2
        rows, chunk = plan_chunks(
            X.shape[0], coalitions, masker.evals_per_coalition,
            self.model.bytes_per_row + jnp.dtype(self._dtype).itemsize * m, self.memory_budget,
        )

        def one(k, x):
            value_fn = lambda masks: map_chunks(lambda mk: masker.coalition_values(f, x, mk), masks, chunk)
            if method == "exact":
                return exact_shapley(value_fn, m)[0]
            return kernel_shapley(k, value_fn, m, coalitions - 2, third_order=m <= 16)[0]

        keys = jax.random.split(key, X.shape[0])
        program = jax.jit(lambda ks, xs: map_chunks(lambda a: jax.vmap(one)(*a), (ks, xs), rows))
        return program(keys, X)

    def fit(
        self,
        X_train: Any,
        key: Any = None,
        *,
        epochs: int = 200,
        batch_size: int = 16,
        learning_rate: float = 3e-3,
        optimizer: optax.GradientTransformation | None = None,
        validation: Any = 0.1,
        reference: str = "auto",
        patience: int = 20,
        jitter: float | str = "auto",
        progress: bool | None = None,
    ) -> "AmortizedExplainer":
        """Train the explainer network on rows ``X_train`` (their own Shapley values are not needed).

        Each epoch shuffles the training rows, draws fresh coalitions for every row and step, and
        takes one optimizer step per batch (one compiled scan per epoch). After each epoch the
        held-out rows are explained and compared with their reference values; the parameters of
        the best epoch are kept, and training stops after ``patience`` epochs without improvement.

        Args:
          X_train: training rows ``[n, M]`` (array or DataFrame); a few hundred to a few thousand
            rows from the distribution to be explained.
          key: PRNG key (``None``: ``jax.random.key(0)``) for initialisation, splits and coalitions.
          epochs: most epochs.
          batch_size: rows per optimizer step (capped at the number of training rows). Default
            16: at the same number of model evaluations, four times the steps of 64 lowered the
            relative error from 0.12 to 0.10 (16 features) and 0.18 to 0.15 (32) on the
            ``amortized`` bench.
          learning_rate: peak learning rate of the default optimizer, Adam with a linear warmup
            over the first 5 % of the steps and a cosine decay to 1 % over the rest
            (``optax.adam(optax.warmup_cosine_decay_schedule(...))``; the warmup lowered the
            relative error 0.137 -> 0.129 at 32 features and 0.087 -> 0.086 at 16 on the
            ``amortized`` bench).
          optimizer: any optax ``GradientTransformation`` instead of the default.
          validation: held-out rows for early stopping: a fraction of ``X_train`` (default 0.1,
            at most 128 rows), a number of rows, or a tuple ``(X_val, values_val)`` of rows and
            their reference Shapley values (``[n, M]`` or ``[n, M, K]``) from any explainer.
          reference: how the held-out rows' values are computed when not given: ``"exact"``
            (all ``2**M`` coalitions), ``"kernel"`` (KernelSHAP, ``2 M + 2048`` coalitions), or
            ``"auto"`` (exact up to 10 features).
          patience: epochs without a better validation error before stopping.
          jitter: every step trains on its batch of rows plus fresh Gaussian noise of this
            standard deviation, in units of each feature's spread over the background (a
            smoothed bootstrap: the rows are drawn from a Gaussian kernel density estimate of
            the training rows). ``"auto"`` (default) uses Silverman's normal-reference bandwidth
            :func:`silverman_factor` (about 0.5 to 0.75 of a spread for 8 to 32 features and
            2000 rows); 0 trains on the rows as given. The objective needs no labels and its
            minimiser is each row's Shapley values wherever the row lies, so widening the
            training distribution this way does not bias the explainer: it only spreads the
            fit over a slightly wider region and stops the network from overfitting the
            coalition noise of a few thousand fixed rows (measured on the ``amortized`` bench:
            relative error 0.19 -> 0.12 at 16 features, 0.25 -> 0.18 at 32, at the same cost,
            as good as training on 16x as many fresh rows). Set it to 0 for features whose
            values cannot move continuously (codes of categories) if the model must only see
            such values; interventional values already mix rows, not values.
          progress: progress bar on stderr (training rows processed); ``None``: when stderr is a
            terminal.

        Returns:
          ``self``, trained.

        Raises:
          ValueError: for bad sizes, too few rows, or a validation tuple of the wrong shape.
        """
        X_train = as_matrix(X_train, "X_train", dtype=self._dtype)
        check_n_features(X_train, self.n_features, "X_train", "the background")
        check_finite(X_train, "X_train")
        epochs = _positive_int(epochs, "epochs")
        batch_size = _positive_int(batch_size, "batch_size")
        patience = _positive_int(patience, "patience")
        if not (jitter == "auto" or (not isinstance(jitter, bool) and isinstance(jitter, (int, float)) and 0 <= jitter < math.inf)):
            raise ValueError(
                f"`jitter` must be 'auto' or a finite number >= 0 (a fraction of each feature's spread); got {jitter!r}."
            )
        if reference not in ("auto", "exact", "kernel"):
            raise ValueError(f"`reference` must be 'auto', 'exact' or 'kernel'; got {reference!r}.")
        if reference == "auto":
            reference = "exact" if self.n_features <= EXACT_REFERENCE_FEATURES else "kernel"
        key = as_key(key)
        k_init, k_split, k_ref, k_train = jax.random.split(key, 4)
        start = time.perf_counter()

        if isinstance(validation, tuple):
            if len(validation) != 2:
                raise ValueError("`validation` as a tuple must be (X_val, values_val).")
            X_val = as_matrix(validation[0], "validation[0]", dtype=self._dtype)
            check_n_features(X_val, self.n_features, "validation[0]", "the background")
            ref = jnp.asarray(validation[1], self._dtype)
            if ref.ndim == 2:
                ref = ref[..., None]
            if ref.shape != (X_val.shape[0], self.n_features, self.model.n_outputs):
                raise ValueError(
                    f"`validation[1]` must hold the Shapley values of validation[0], shape "
                    f"{(X_val.shape[0], self.n_features) + (() if self.model.single_output else (self.model.n_outputs,))}; "
                    f"got {tuple(np.shape(validation[1]))}."
                )
            train = X_train
        else:
            n = X_train.shape[0]
            if isinstance(validation, float) and not isinstance(validation, bool) and 0 < validation < 1:
                n_val = min(max(1, int(round(validation * n))), 128)
            elif isinstance(validation, (int, np.integer)) and not isinstance(validation, bool) and validation >= 1:
                n_val = int(validation)
            else:
                raise ValueError(
                    f"`validation` must be a fraction in (0, 1), a number of rows, or (X_val, values_val); got {validation!r}."
                )
            if n - n_val < 1:
                raise ValueError(f"`X_train` has {n} rows: too few to hold out {n_val} for validation and train on the rest.")
            order = jax.random.permutation(k_split, n)
            X_val, train = X_train[order[:n_val]], X_train[order[n_val:]]
            ref = self._reference(X_val, k_ref, reference)
        ref_norm = float(jnp.sqrt((ref**2).sum()))
        ref_norm = ref_norm if ref_norm > 0 else 1.0

        jitter = silverman_factor(train.shape[0], self.n_features) if jitter == "auto" else float(jitter)
        self.jitter_ = jitter
        batch_size = min(batch_size, train.shape[0])
        steps = epochs * (train.shape[0] // batch_size)
        if optimizer is None:
            if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)) or not learning_rate > 0:
                raise ValueError(f"`learning_rate` must be a positive number; got {learning_rate!r}.")
            peak, warmup = float(learning_rate), steps // 20
            if warmup:
                schedule = optax.warmup_cosine_decay_schedule(0.0, peak, warmup, steps, end_value=0.01 * peak)
            else:
                schedule = optax.cosine_decay_schedule(peak, max(steps, 1), alpha=0.01)
            optimizer = optax.adam(schedule)
        m, k = self.n_features, self.model.n_outputs
        params = init_mlp(k_init, (m,) + self.hidden + (m * k,), self._dtype)
        state = optimizer.init(params)
        average, count = params, jnp.zeros((), self._dtype)
        epoch_fn = self._make_epoch(optimizer, batch_size, jitter)
        fx_val = self.model.fn(X_val)
        val_phi = jax.jit(lambda p: self._phi(p, X_val, fx_val))

        best, best_params, waited = math.inf, params, 0
        history = {"loss": [], "validation_error": []}
        show = wants_progress(progress)
        bar = ProgressBar(epochs * train.shape[0], desc="Training") if show else None
        try:
            for e in range(epochs):
                params, average, state, count, loss = epoch_fn(
                    params, average, state, count, train, jax.random.fold_in(k_train, e)
                )
                err = float(jnp.sqrt(((val_phi(average) - ref) ** 2).sum())) / ref_norm
                history["loss"].append(float(loss))
                history["validation_error"].append(err)
                if bar is not None:
                    bar.update(train.shape[0])
                if not math.isfinite(err):
                    raise FloatingPointError(
                        f"training diverged at epoch {e} (validation error {err}); lower `learning_rate`."
                    )
                if err < best:
                    best, best_params, waited = err, average, 0
                else:
                    waited += 1
                    if waited >= patience:
                        break
        finally:
            if bar is not None:
                bar.close()
        self.params = best_params
        self.history_ = history
        self.validation_error_ = best
        self.fit_seconds_ = time.perf_counter() - start
        return self

    # --- explaining ---------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if self.params is None:
            raise ValueError("This AmortizedExplainer is not trained: call .fit(X_train, key=...) or load a saved one first.")

    @property
    def expected_value(self) -> jax.Array:
        """The mean model output over the background, ``[K]`` (a scalar for one output)."""
        return self.base[0] if self.model.single_output else self.base

    # --- the shared runtime's contract (see jaxshap._engine._rows) ---------------------------
    def _validate(self, X: Any) -> jax.Array:
        self._check_fitted()
        X = as_matrix(X, "X", dtype=self._dtype)
        check_n_features(X, self.n_features, "X", "the explainer")
        check_finite(X, "X")
        return X

    def _bytes_per_row(self) -> int:
        """A row's model evaluation and the network's activations (kept for the normalisation)."""
        m, k = self.n_features, self.model.n_outputs
        widths = 2 * m + 2 * sum(self.hidden) + 3 * m * k + k
        return self.model.bytes_per_row + np.dtype(self._dtype).itemsize * widths

    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, None]:
        rows, _ = super()._plan(n_rows, exact)
        return min(rows, EXPLAIN_ROWS_PER_CHUNK), None

    def _explain_rows(self, X: jax.Array, keys: jax.Array):
        """``phi = normalise(g(x), f(x) - E f)`` for a chunk of rows; no key is used."""
        del keys
        phi = self._phi(self.params, X, self.model.fn(X))
        return phi, jnp.broadcast_to(self.base, (X.shape[0], self.model.n_outputs)), None

    def _core(self) -> "AmortizedExplainer":
        """Only what explaining reads (:data:`EXPLAIN_FIELDS`): no names, background or training
        settings, so every explainer with the same model and network shapes shares one program,
        a loaded one included."""
        core = object.__new__(type(self))
        for name in EXPLAIN_FIELDS:
            setattr(core, name, getattr(self, name))
        return core

    def _wrap(self, phi, base, stderr, X, names) -> Explanation:
        if self.model.single_output:
            phi, base = drop_output_axis((phi, base))
        feature_names = resolve_feature_names(self._names, self.n_features, self._bg_names, names)
        output_names = None if self.model.single_output else [f"Output {j}" for j in range(self.model.n_outputs)]
        return Explanation(phi, base, X, None, feature_names, output_names)

    def __call__(self, X: Any, key: Any = None, *, progress: bool | None = None, devices: Any = None) -> Explanation:
        """Explain the rows of ``X`` with one pass of the trained network (and of the model).

        Args:
          X: rows ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted; a JAX array
            sharded over devices along its rows is explained where it lies).
          key: unused (the explainer is deterministic once trained); accepted for a uniform API.
          progress: progress bar on stderr (``None``: only when stderr is a terminal).
          devices: ``None`` (run where ``X`` lies), ``"local"`` or a sequence of devices to shard
            the rows over.

        Returns:
          An :class:`Explanation` with ``values`` ``[n, M]`` (or ``[n, M, K]``), ``base_values``
          the mean model output over the background and ``stderr`` ``None``; efficiency holds to
          float rounding.
        """
        self._check_fitted()
        del key
        return super().__call__(X, None, progress=progress, devices=devices)

    def shap_values(self, X: Any) -> np.ndarray:
        """The values as NumPy, in shap's shapes: ``[n, M]`` or ``[n, M, K]``."""
        return np.asarray(self(X, progress=False).values)

    # --- saving -------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Save the trained explainer to a NumPy ``.npz`` file (arrays plus a JSON ``config``).

        The model is not saved: pass it again to :meth:`load`. Neither is the background; what
        explaining needs from it (the base value and the input and output scales) is.
        """
        self._check_fitted()
        config = {
            "format_version": FORMAT_VERSION,
            "n_features": self.n_features,
            "n_outputs": self.model.n_outputs,
            "single_output": self.model.single_output,
            "hidden": list(self.hidden),
            "n_coalitions": self.n_coalitions,
            "background_samples": self.background_samples,
            "dtype": str(jnp.dtype(self._dtype)),
            "feature_names": None if self._resolved_names() is None else list(self._resolved_names()),
            "validation_error": self.validation_error_,
            "fit_seconds": self.fit_seconds_,
            "history": self.history_,
        }
        arrays = {"base": self.base, "x_mean": self.x_mean, "x_scale": self.x_scale, "y_scale": self.y_scale}
        for i, layer in enumerate(self.params):
            arrays[f"layer{i}_w"], arrays[f"layer{i}_b"] = layer["w"], layer["b"]
        with open(path, "wb") as fh:
            np.savez(fh, config=np.array(json.dumps(config)), **{k: np.asarray(v) for k, v in arrays.items()})

    def _resolved_names(self):
        if self._names is not None:
            return [str(n) for n in self._names]
        return None if self._bg_names is None else list(self._bg_names)

    @classmethod
    def load(cls, path: str, model: Callable) -> "AmortizedExplainer":
        """Load an explainer saved by :meth:`save`; ``model`` is the model it was trained to explain.

        Raises:
          ValueError: when the file is not a saved explainer, or ``model``'s output count differs.
        """
        with np.load(path, allow_pickle=False) as files:
            if "config" not in files:
                raise ValueError(f"{path!r} is not a saved AmortizedExplainer (no `config` entry).")
            config = json.loads(str(files["config"]))
            arrays = {k: files[k] for k in files.files if k != "config"}
        if config.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path!r} has format version {config.get('format_version')}; this jaxshap reads {FORMAT_VERSION}.")
        obj = object.__new__(cls)
        m = obj.n_features = int(config["n_features"])
        obj.hidden = tuple(config["hidden"])
        obj.n_coalitions = int(config["n_coalitions"])
        obj.background_samples = int(config["background_samples"])
        obj.memory_budget = DEFAULT_MEMORY_BUDGET
        obj.masker = None
        obj._names = config["feature_names"]
        obj._bg_names = None
        obj._dtype = jnp.dtype(config["dtype"])
        obj.model = wrap_model(model, m, obj._dtype, arrays["x_mean"][None, :])
        if obj.model.n_outputs != config["n_outputs"] or obj.model.single_output != config["single_output"]:
            raise ValueError(
                f"`model` returns {obj.model.n_outputs} output(s) but the saved explainer was trained for "
                f"{config['n_outputs']}; pass the model it was trained on."
            )
        obj._set_statistics(arrays["base"], arrays["x_mean"], arrays["x_scale"], arrays["y_scale"])
        n_layers = len(obj.hidden) + 1
        obj.params = [
            {"w": jnp.asarray(arrays[f"layer{i}_w"]), "b": jnp.asarray(arrays[f"layer{i}_b"])} for i in range(n_layers)
        ]
        obj.history_ = config["history"]
        obj.validation_error_ = config["validation_error"]
        obj.fit_seconds_ = config["fit_seconds"]
        return obj


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


def _spread(a: np.ndarray) -> np.ndarray:
    """Column standard deviations, with constant columns (and a zero overall spread) mapped to 1."""
    std = a.std(axis=0)
    floor = 1e-6 * max(float(np.abs(a).max()), 1.0)
    return np.where(std > floor, std, 1.0)
