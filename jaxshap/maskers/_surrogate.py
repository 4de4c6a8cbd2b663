r"""A learned conditional value function: ``maskers.Surrogate``, a network trained on masked rows."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core._inputs import as_key, as_matrix, check_finite, column_names, is_traced
from .._core._model import wrap_model
from .._core._pytree import network_arrays, network_from_arrays, read_saved, write_saved
from .._core._validate import layer_widths
from .._estimators._fastshap import apply_mlp, init_mlp
from .._estimators._training import check_training, cost_text, fit_network, holdout, spread, uniform_size_masks
from ._base import Masker

FORMAT_VERSION = 1
"""Version of :meth:`Surrogate.save`'s file layout."""

FINGERPRINT_ROWS = 4
"""Rows whose model outputs identify the trained model (:meth:`Surrogate.check_model`)."""

FINGERPRINT_TOLERANCE = 1e-3
"""A model matches the fingerprint when its outputs on the rows lie within this fraction of
(the output's spread plus the output's size) of the recorded ones."""

VALIDATION_MASKS = 4
"""Coalitions drawn once per held-out row to score the network for early stopping."""

ARRAYS = ("x_mean", "x_scale", "y_mean", "y_scale", "base", "fingerprint_rows", "fingerprint_outputs")


def surrogate_predict(params: list[dict], z: jax.Array, masks: jax.Array) -> jax.Array:
    """The network on standardised rows ``z [..., M]`` and coalitions ``masks [..., M]``: ``[..., K]``.

    Its input is ``(z * m, m)``: the coalition's standardised values, zero elsewhere, and the mask.
    """
    inputs = jnp.concatenate([jnp.where(masks, z, 0.0), masks.astype(z.dtype)], axis=-1)
    lead = inputs.shape[:-1]
    return apply_mlp(params, inputs.reshape(-1, inputs.shape[-1])).reshape(lead + (-1,))


class Surrogate(Masker):
    r"""Observational coalition values from a surrogate network: ``v_x(S) = g(x_S, S)``, no model calls.

    A network ``g`` (an MLP on the standardised row with the absent features zeroed, plus the
    mask) is trained with optax on the rows of ``data``, each with a random coalition ``S``, to
    predict the model's output ``f(x)`` from ``x_S``:

    .. math::

        \min_g\ \mathbb E_{x}\, \mathbb E_{S}\, \bigl\| g(x_S, S) - f(x) \bigr\|^2,
        \qquad g^*(x_S, S) = \mathbb E\bigl[f(X) \mid X_S = x_S\bigr],

    whose minimiser is the conditional expectation of the model's output (Frye, de Mijolla,
    Begley, Cowton, Stanley & Feige, 2021, "Shapley explainability on the data manifold", ICLR;
    the regression surrogate of Olsen, Glad, Jullum & Aas, 2024, "A comparative study of methods
    for estimating model-agnostic Shapley value explanations"). Coalitions are drawn with a size
    uniform on ``0..M`` and then a uniform subset: the Shapley value weighs every coalition
    size equally (:func:`jaxshap._estimators._training.uniform_size_masks`), whereas the
    Shapley kernel's size distribution would spend most training on the smallest and largest
    coalitions. The loss is taken on outputs standardised by their spread over ``data``.

    A coalition value then costs one network pass and **no model evaluation**
    (``evals_per_coalition = 0``; the chunk planner counts the network's activations through
    ``bytes_per_coalition``). Two coalitions are exact: the full one returns ``f(x)`` itself
    (one evaluation per call of :meth:`coalition_values`), and the empty one returns ``E f``,
    the mean of the model's outputs over ``data``; so efficiency sums to ``f(x) - E f``. The
    values are the trained network's approximation of the conditional expectation, as good as
    its validation loss (``validation_loss_``, the mean squared error over the output
    variance on held-out rows and coalitions).

    **The model is checked.** :meth:`coalition_values` ignores its ``f`` except for the full
    coalition, so explaining another model with this masker would be silently wrong. The masker
    records the trained model's outputs on :data:`FINGERPRINT_ROWS` rows, and explainers call
    :meth:`check_model` when they are built, which evaluates the model on those rows and raises
    when the outputs differ. The check needs concrete outputs: an explainer built inside a JAX
    transformation whose model is traced cannot compare them and is not checked (a traced
    comparison could only poison the values with NaN, which would be reported as a model
    fault), so build explainers outside ``jax.jit`` to have it.

    **Cost.** Training evaluates the model once on every row of ``data`` and then takes
    ``epochs_run x (n_train // batch_size)`` optimizer steps of ``batch_size`` masked rows
    (:attr:`cost`); no model evaluations during training.

    Args:
      model: the model to be explained, ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy).
      data: rows ``[N, M]`` from the distribution the values are conditional on (array or
        DataFrame); a few thousand rows for a few features.
      key: PRNG key (``None``: ``jax.random.key(0)``) of the split, initialisation and coalitions;
        the same key gives the same network.
      hidden: hidden layer widths, default ``(64, 64)``.
      epochs: most passes over the training rows, default 100.
      batch_size: rows per optimizer step, default 64.
      learning_rate: peak learning rate of Adam (5 % warmup, cosine decay to 1 %), default 3e-3.
      patience: epochs without a lower validation loss before stopping, default 10.
      validation_fraction: share of ``data`` held out for early stopping, default 0.1.
      feature_names: optional names of the ``M`` features (default: a DataFrame's columns).

    Attributes:
      history_: per epoch run, ``"loss"`` and ``"validation_error"`` (relative squared error).
      validation_loss_: the kept network's validation loss.

    Example::

        masker = jaxshap.maskers.Surrogate(model, X_train, key=jax.random.key(0))
        expl = jaxshap.ExactExplainer(model, masker)(X)
        masker.save("surrogate.npz"); masker = jaxshap.maskers.Surrogate.load("surrogate.npz")
    """

    def __init__(
        self,
        model: Callable,
        data: Any,
        *,
        key: Any = None,
        hidden: Sequence[int] = (64, 64),
        epochs: int = 100,
        batch_size: int = 64,
        learning_rate: float = 3e-3,
        patience: int = 10,
        validation_fraction: float = 0.1,
        feature_names: Sequence[str] | None = None,
    ):
        names = column_names(data) if feature_names is None else list(feature_names)
        x = as_matrix(data, "data")
        check_finite(x, "data")
        m = x.shape[1]
        if names is not None and len(names) != m:
            raise ValueError(f"`feature_names` has {len(names)} names but `data` has {m} features.")
        self.feature_names = None if names is None else tuple(str(n) for n in names)
        self.hidden = layer_widths(hidden, "hidden")
        options = check_training(epochs, batch_size, learning_rate, patience, validation_fraction)
        fn = wrap_model(model, m, x.dtype, x[:FINGERPRINT_ROWS]).fn
        y = jnp.asarray(fn(x), x.dtype)  # [N, K]
        k_split, k_init, k_val, k_train = jax.random.split(as_key(key), 4)
        train, val = holdout(k_split, x.shape[0], options.validation_fraction)
        self._set_scales(np.asarray(x[train], np.float64), np.asarray(y, np.float64), x.dtype)
        self.fingerprint_rows, self.fingerprint_outputs = x[val[:FINGERPRINT_ROWS]], y[val[:FINGERPRINT_ROWS]]
        z, t = (x - self.x_mean) / self.x_scale, (y - self.y_mean) / self.y_scale
        params = init_mlp(k_init, (2 * m,) + self.hidden + (y.shape[1],), x.dtype)
        self.params, self.history_, batch = fit_network(
            _loss, _validation_error, params, (z[train], t[train]), _held_out(z[val], t[val], k_val), k_train, options
        )
        self.validation_loss_ = min(self.history_["validation_error"])
        self.cost_ = cost_text(self.history_, len(train) // batch, batch)

    def _set_scales(self, x: np.ndarray, y: np.ndarray, dtype) -> None:
        to = lambda a: jnp.asarray(a, dtype)
        self.x_mean, self.x_scale = to(x.mean(0)), to(spread(x))
        self.y_mean, self.y_scale, self.base = to(y.mean(0)), to(spread(y)), to(y.mean(0))

    # --- the masker protocol -------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self.x_mean.shape[0]

    @property
    def n_outputs(self) -> int:
        """``K``, the outputs of the model the network was trained on."""
        return self.base.shape[0]

    @property
    def dtype(self):
        return self.x_mean.dtype

    @property
    def evals_per_coalition(self) -> int:
        """No model evaluation per coalition (the network stands in for the model)."""
        return 0

    @property
    def bytes_per_coalition(self) -> int:
        """The network's activations for one coalition (input, hidden layers, output)."""
        widths = 2 * self.n_features + 2 * sum(self.hidden) + 2 * self.n_outputs
        return np.dtype(self.dtype).itemsize * widths

    @property
    def probe_rows(self) -> jax.Array:
        """The fingerprint rows (rows of ``data``)."""
        return self.fingerprint_rows

    @property
    def cost(self) -> str:
        """The training's cost: epochs run x optimizer steps per epoch x rows per step."""
        return self.cost_

    def check_model(self, f: Callable[[jax.Array], jax.Array]) -> None:
        """Raise unless ``f`` gives the trained model's outputs on the fingerprint rows.

        Skipped when the outputs are traced (an explainer built inside a JAX transformation).

        Raises:
          ValueError: when ``f``'s outputs differ, or it has another number of outputs.
        """
        out = f(self.fingerprint_rows)
        if is_traced(out):
            return
        out, ref = np.asarray(out, np.float64), np.asarray(self.fingerprint_outputs, np.float64)
        scale = np.asarray(self.y_scale, np.float64)
        if out.shape != ref.shape or np.any(np.abs(out - ref) > FINGERPRINT_TOLERANCE * (scale + np.abs(ref))):
            raise ValueError(
                "This Surrogate masker was trained on another model: the explained model's outputs on its "
                f"fingerprint rows are {np.round(out.ravel()[:4], 6).tolist()}, the trained model's "
                f"{np.round(ref.ravel()[:4], 6).tolist()}. Train a Surrogate on the model you explain."
            )

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S) = g(x_S, S)`` for each coalition; ``f(x)`` for the full one, ``E f`` for the empty one.

        Args:
          f: the model (evaluated once, on ``x``, for the full coalition).
          x: the explained row, ``[M]``.
          masks: ``[C, M]`` boolean coalitions.

        Returns:
          ``[C, K]`` coalition values.
        """
        z = (x - self.x_mean) / self.x_scale
        values = self.y_mean + self.y_scale * surrogate_predict(self.params, jnp.broadcast_to(z, masks.shape), masks)
        full, empty = masks.all(axis=-1)[:, None], ~masks.any(axis=-1)[:, None]
        return jnp.where(full, f(x[None, :])[0], jnp.where(empty, self.base, values))

    def __repr__(self) -> str:
        m = "traced" if is_traced(self.x_mean) else self.n_features
        return f"Surrogate(features: {m}, outputs: {self.n_outputs}, hidden: {self.hidden})"

    # --- saving --------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Save the trained network and its scales to a NumPy ``.npz`` file (arrays and a JSON config).

        The model is not saved; explainers check the model they are given against the saved
        fingerprint.
        """
        config = {
            "kind": "Surrogate", "format_version": FORMAT_VERSION, "hidden": list(self.hidden),
            "dtype": str(np.dtype(self.dtype)), "feature_names": None if self.feature_names is None else list(self.feature_names),
            "history": self.history_, "validation_loss": self.validation_loss_, "cost": self.cost_,
        }
        write_saved(path, config, {**{a: getattr(self, a) for a in ARRAYS}, **network_arrays(self.params)})

    @classmethod
    def load(cls, path: str) -> "Surrogate":
        """A Surrogate masker saved by :meth:`save`.

        Raises:
          ValueError: when the file is not a saved Surrogate or has another format version.
        """
        config, arrays = read_saved(path, "Surrogate", FORMAT_VERSION)
        obj = cls.__new__(cls)
        dtype = np.dtype(config["dtype"])
        for name in ARRAYS:
            setattr(obj, name, jnp.asarray(arrays[name], dtype))
        obj.hidden = tuple(config["hidden"])
        obj.feature_names = None if config["feature_names"] is None else tuple(config["feature_names"])
        obj.params = network_from_arrays(arrays, len(obj.hidden) + 1)
        obj.history_, obj.validation_loss_, obj.cost_ = config["history"], config["validation_loss"], config["cost"]
        return obj


def _loss(params: list[dict], batch: tuple[jax.Array, jax.Array], key: jax.Array) -> jax.Array:
    """Mean squared error of the network on a batch of standardised rows, each with a random coalition."""
    z, t = batch
    masks = uniform_size_masks(key, z.shape[0], z.shape[1])
    return jnp.mean((surrogate_predict(params, z, masks) - t) ** 2)


def _held_out(z: jax.Array, t: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(rows [n, V, M], masks [n, V, M], targets [n, K])``: the held-out rows, each with ``V``
    fixed random coalitions, for :func:`_validation_error`."""
    n, m = z.shape
    masks = uniform_size_masks(key, n * VALIDATION_MASKS, m).reshape(n, VALIDATION_MASKS, m)
    return jnp.broadcast_to(z[:, None, :], masks.shape), masks, t


def _validation_error(params: list[dict], held: tuple[jax.Array, jax.Array, jax.Array]) -> jax.Array:
    """The squared error on the held-out rows and their fixed coalitions (:func:`_held_out`)."""
    zs, masks, t = held
    return jnp.mean((surrogate_predict(params, zs, masks) - t[:, None, :]) ** 2)
