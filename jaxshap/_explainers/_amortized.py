"""``AmortizedExplainer``: FastSHAP, an explainer network trained with optax.

Training costs model evaluations once (coalition values of the training rows); afterwards a
row's Shapley values cost one pass of a small network plus one model evaluation (for the exact
efficiency normalisation), whatever the number of features.

A trained explainer saves to one NumPy ``.npz`` file (:mod:`jaxshap._core._pytree`): a JSON
``config`` entry (sizes, dtype, names, the training record, ``kind`` and :data:`FORMAT_VERSION`)
and the arrays explaining needs, the base value ``base``, the input and output scales ``x_mean``,
``x_scale``, ``y_scale`` and, per layer ``i`` of the network, ``layer{i}_w`` and ``layer{i}_b``.
Neither the model nor the background is saved.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._core._chunking import ProgressBar, map_chunks, plan_chunks, wants_progress
from .._core._inputs import as_key, as_matrix, check_finite, check_n_features, resolve_feature_names
from .._core._model import wrap_model
from .._core._pytree import network_arrays, network_from_arrays, read_saved, write_saved
from .._core._validate import DEFAULT_MEMORY_BUDGET, choice, integer, is_integer, layer_widths, number
from .._core._validate import memory_budget as check_memory_budget
from .._engine._explainer import drop_output_axis
from .._engine._rows import RowExplainer
from .._estimators._exact import exact_shapley
from .._estimators._fastshap import Scaling, TrainingConfig, network_values, train_amortized
from .._estimators._kernel import kernel_shapley
from .._result._explanation import Explanation
from ..maskers import Independent
from .._estimators._training import default_optimizer, silverman_factor, spread
from ._gradient import check_plain_background

FORMAT_VERSION = 1
"""Version of the saved file layout (``.npz`` arrays plus a JSON ``config``)."""

STATISTICS = ("base", "x_mean", "x_scale", "y_scale")
"""The explainer's scales saved beside the network."""

SAVED = {"n_features": "n_features", "n_coalitions": "n_coalitions", "background_samples": "background_samples",
         "validation_error": "validation_error_", "fit_seconds": "fit_seconds_", "history": "history_"}
"""``{config entry: attribute}`` saved and loaded as they are (widths, dtype, names and output count convert)."""

EXACT_REFERENCE_FEATURES = 10
"""Up to this many features the validation rows are explained exactly (2**M coalitions), above
with KernelSHAP at its default budget."""

EXPLAIN_ROWS_PER_CHUNK = 8192
"""Most rows per chunk of the explaining pass (network and model); fewer when the activations
of that many rows exceed the chunk's memory (``memory_budget``, capped on a CPU)."""


EXPLAIN_FIELDS = ("n_features", "model", "_dtype", "base", "x_mean", "x_scale", "y_scale", "params")
"""The attributes the explaining pass reads (the compiled program's argument, see ``_core``)."""


def default_hidden(n_features: int) -> tuple[int, ...]:
    """The explainer network's default widths: ``(128, 128)`` up to 8 features, else ``(256, 256)``."""
    return (128, 128) if n_features <= 8 else (256, 256)


def _check_hidden(hidden: Any, n_features: int) -> tuple[int, ...]:
    """``hidden`` as a tuple of positive layer widths (``"auto"``: :func:`default_hidden`)."""
    if isinstance(hidden, str) and hidden == "auto":
        return default_hidden(n_features)
    return layer_widths(hidden, "hidden")


def _check_n_coalitions(n_coalitions: Any) -> int:
    rule = "an even integer of at least 2 (coalitions come in complementary pairs)"
    n_coalitions = integer(n_coalitions, "n_coalitions", least=2, rule=rule)
    if n_coalitions % 2:
        raise ValueError(f"`n_coalitions` must be {rule}; got {n_coalitions}.")
    return n_coalitions


def _check_jitter(jitter: Any) -> float | str:
    if isinstance(jitter, str) and jitter == "auto":
        return jitter
    return number(jitter, "jitter", least=0.0, rule="'auto' or a finite number >= 0 (a fraction of each feature's spread)")


def _held_out_rows(validation: Any, n_rows: int) -> int:
    """The number of held-out rows that ``validation`` (a fraction or a count) asks for."""
    rule = "a fraction in (0, 1), a number of rows, or (X_val, values_val)"
    if is_integer(validation):
        n_val = integer(validation, "validation", least=1, rule=rule)
    else:
        n_val = min(max(1, int(round(number(validation, "validation", above=0.0, below=1.0, rule=rule) * n_rows))), 128)
    if n_rows - n_val < 1:
        raise ValueError(f"`X_train` has {n_rows} rows: too few to hold out {n_val} for validation and train on the rest.")
    return n_val


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
    or KernelSHAP values, used for early stopping and reported as ``validation_error_``. The
    training loop is the pure :func:`jaxshap._estimators._fastshap.train_amortized`.

    Cost. Training evaluates the model on ``epochs * n_train * n_coalitions * background_samples``
    rows; explaining then costs one network pass plus one model evaluation per row.
    KernelExplainer instead spends ``(n_coalitions + 2) * B`` model evaluations per row, and the
    coalitions it needs for a given error grow with the number of features, so the amortized
    explainer pays most for many rows of many features (``bench/scenarios/amortized.py``
    measures where training pays for itself). The values are an approximation whose error is
    set by training and does not shrink at explain time: check ``validation_error_`` (relative
    Frobenius error on the held-out rows) before trusting the values, train longer or on more
    rows to lower it, and retrain when the data shift.

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
        Shapley kernel, which removes the sampling noise (``M <= 5`` at the default).
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
      jitter_: the jitter the training used (``"auto"`` resolved).
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
        check_plain_background(masker, "AmortizedExplainer")
        self.masker = masker
        self.n_features = masker.n_features
        self.hidden = _check_hidden(hidden, self.n_features)
        self.n_coalitions = _check_n_coalitions(n_coalitions)
        self.averaging = number(averaging, "averaging", least=0.0, below=1.0,
                                rule="a number in [0, 1) (an exponential moving-average decay)")
        n_bg = masker.data.shape[0]
        samples = n_bg if background_samples is None else integer(background_samples, "background_samples", least=1)
        self.background_samples = min(samples, n_bg)
        self.memory_budget = check_memory_budget(memory_budget)
        self._names = feature_names
        self._bg_names = masker.feature_names
        dtype = masker.dtype
        self.model = wrap_model(model, self.n_features, dtype, masker.data)
        self._dtype = dtype
        data = np.asarray(masker.data, np.float64)
        outputs = np.asarray(self.model.fn(masker.data), np.float64)  # [B, K]
        self._set_statistics(base=outputs.mean(0), x_mean=data.mean(0), x_scale=spread(data), y_scale=spread(outputs))
        self.params = None
        self.history_ = None
        self.validation_error_ = None
        self.fit_seconds_ = None

    def _set_statistics(self, base, x_mean, x_scale, y_scale) -> None:
        to = lambda a: jnp.asarray(a, self._dtype)
        self.base, self.x_mean, self.x_scale, self.y_scale = to(base), to(x_mean), to(x_scale), to(y_scale)

    def _scaling(self) -> Scaling:
        return Scaling(self.base, self.x_mean, self.x_scale, self.y_scale)

    def _phi(self, params, X, fx):
        """The network's efficient attributions ``[n, M, K]`` (:func:`network_values`)."""
        return network_values(params, self._scaling(), X, fx)

    # --- training -----------------------------------------------------------------------------
    def _rows(self, X: Any, name: str) -> jax.Array:
        X = as_matrix(X, name, dtype=self._dtype)
        check_n_features(X, self.n_features, name, "the background")
        return X

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

    def _given_validation(self, validation: tuple) -> tuple[jax.Array, jax.Array]:
        """``(X_val, values_val)`` checked, the values as ``[v, M, K]``."""
        if len(validation) != 2:
            raise ValueError("`validation` as a tuple must be (X_val, values_val).")
        X_val = self._rows(validation[0], "validation[0]")
        ref = jnp.asarray(validation[1], self._dtype)
        if ref.ndim == 2:
            ref = ref[..., None]
        if ref.shape != (X_val.shape[0], self.n_features, self.model.n_outputs):
            shape = (X_val.shape[0], self.n_features) + (() if self.model.single_output else (self.model.n_outputs,))
            raise ValueError(
                f"`validation[1]` must hold the Shapley values of validation[0], shape {shape}; "
                f"got {tuple(np.shape(validation[1]))}."
            )
        return X_val, ref

    def _split(self, X_train, validation, reference, k_split, k_ref):
        """``(training rows, (X_val, values_val))``: given, or held out of ``X_train`` and computed."""
        if isinstance(validation, tuple):
            return X_train, self._given_validation(validation)
        n = X_train.shape[0]
        n_val = _held_out_rows(validation, n)
        order = jax.random.permutation(k_split, n)
        X_val, rows = X_train[order[:n_val]], X_train[order[n_val:]]
        if reference == "auto":
            reference = "exact" if self.n_features <= EXACT_REFERENCE_FEATURES else "kernel"
        return rows, (X_val, self._reference(X_val, k_ref, reference))

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
        the best epoch are kept, and training stops after ``patience`` epochs without improvement
        (:func:`jaxshap._estimators._fastshap.train_amortized`).

        Args:
          X_train: training rows ``[n, M]`` (array or DataFrame); a few hundred to a few thousand
            rows from the distribution to be explained.
          key: PRNG key (``None``: ``jax.random.key(0)``) for initialisation, splits and coalitions.
          epochs: most epochs.
          batch_size: rows per optimizer step (capped at the number of training rows), default 16.
          learning_rate: peak learning rate of the default optimizer, Adam with a linear warmup
            over the first 5 % of the steps and a cosine decay to 1 % over the rest
            (:func:`jaxshap._estimators._training.default_optimizer`).
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
            coalition noise of a few thousand fixed rows. Set it to 0 for features whose
            values cannot move continuously (codes of categories) if the model must only see
            such values; interventional values already mix rows, not values.
          progress: progress bar on stderr (training rows processed); ``None``: when stderr is a
            terminal.

        Returns:
          ``self``, trained.

        Raises:
          ValueError: for bad sizes, too few rows, or a validation tuple of the wrong shape.
          FloatingPointError: when training diverges (a non-finite validation error).
        """
        X_train = self._rows(X_train, "X_train")
        check_finite(X_train, "X_train")
        epochs = integer(epochs, "epochs", least=1)
        batch_size = integer(batch_size, "batch_size", least=1)
        patience = integer(patience, "patience", least=1)
        jitter = _check_jitter(jitter)
        reference = choice(reference, "reference", ("auto", "exact", "kernel"))
        if optimizer is None:
            learning_rate = number(learning_rate, "learning_rate", above=0.0, rule="a positive number")
        k_init, k_split, k_ref, k_train = jax.random.split(as_key(key), 4)
        start = time.perf_counter()
        rows, validation = self._split(X_train, validation, reference, k_split, k_ref)
        self.jitter_ = silverman_factor(rows.shape[0], self.n_features) if jitter == "auto" else jitter
        batch_size = min(batch_size, rows.shape[0])
        if optimizer is None:
            optimizer = default_optimizer(learning_rate, epochs * (rows.shape[0] // batch_size))
        config = TrainingConfig(
            self.n_features, self.model.n_outputs, self.hidden, self.n_coalitions, self.background_samples,
            self.averaging, batch_size, epochs, patience, self.jitter_,
        )
        bar = ProgressBar(epochs * rows.shape[0], desc="Training") if wants_progress(progress) else None
        try:
            self.params, self.history_ = train_amortized(
                k_init, k_train, config, self.model.fn, self.masker.data, self._scaling(), rows, validation,
                optimizer, on_epoch=None if bar is None else bar.update,
            )
        finally:
            if bar is not None:
                bar.close()
        self.validation_error_ = min(self.history_["validation_error"])
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

    # --- saving (the file layout: the module docstring) ------------------------------------------
    def save(self, path: str) -> None:
        """Save the trained explainer to a NumPy ``.npz`` file (arrays plus a JSON ``config``).

        The model is not saved: pass it again to :meth:`load`. Neither is the background; what
        explaining needs from it (the base value and the input and output scales) is.
        """
        self._check_fitted()
        names = self._resolved_names()
        config = {
            "kind": "AmortizedExplainer",
            "format_version": FORMAT_VERSION,
            "n_outputs": self.model.n_outputs,
            "single_output": self.model.single_output,
            "hidden": list(self.hidden),
            "dtype": str(jnp.dtype(self._dtype)),
            "feature_names": None if names is None else list(names),
            **{key: getattr(self, name) for key, name in SAVED.items()},
        }
        arrays = {name: getattr(self, name) for name in STATISTICS}
        write_saved(path, config, {**arrays, **network_arrays(self.params)})

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
        config, arrays = read_saved(path, "AmortizedExplainer", FORMAT_VERSION)
        obj = object.__new__(cls)
        for key, name in SAVED.items():
            setattr(obj, name, config[key])
        obj.hidden = tuple(config["hidden"])
        obj.memory_budget = DEFAULT_MEMORY_BUDGET
        obj.masker = None
        obj._names = config["feature_names"]
        obj._bg_names = None
        obj._dtype = jnp.dtype(config["dtype"])
        obj.model = wrap_model(model, obj.n_features, obj._dtype, arrays["x_mean"][None, :])
        if obj.model.n_outputs != config["n_outputs"] or obj.model.single_output != config["single_output"]:
            raise ValueError(
                f"`model` returns {obj.model.n_outputs} output(s) but the saved explainer was trained for "
                f"{config['n_outputs']}; pass the model it was trained on."
            )
        obj._set_statistics(*(arrays[name] for name in STATISTICS))
        obj.params = network_from_arrays(arrays, len(obj.hidden) + 1)
        return obj
