r"""A learned conditional distribution: ``maskers.Generative``, a masked variational autoencoder (vaeac)."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core._categorical import categorical_columns, category_codes, frame_categories
from .._core._inputs import as_key, as_matrix, check_finite, column_names, is_traced
from .._core._pytree import network_arrays, network_from_arrays, read_saved, write_saved
from .._core._validate import integer, layer_widths
from .._estimators._training import check_training, cost_text, fit_network, holdout, spread, uniform_size_masks
from .._estimators._density import Layout, draw, encode, init_vaeac, negative_elbo
from ._base import ConditionalSampler

DEFAULT_SAMPLES = 256
"""Draws per coalition value (model evaluations per coalition)."""

FORMAT_VERSION = 1
"""Version of :meth:`Generative.save`'s file layout."""

VALIDATION_MASKS = 4
"""Coalitions (with fixed latent draws) per held-out row for the early-stopping score."""

NETWORKS = ("prior", "decoder")
"""The networks sampling needs (the full encoder only serves training)."""


@dataclasses.dataclass(frozen=True)
class _Elbo:
    """The training loss: the negative vaeac bound on a batch ``(zs, codes)`` of rows, each with
    a random coalition and latent draw from ``key``. A frozen dataclass, so that maskers with
    equal layouts share the compiled training program (:func:`jaxshap._estimators._training.fit_network`)."""

    layout: Layout

    def __call__(self, params, batch, key):
        zs, codes = batch
        k_mask, k_eps = jax.random.split(key)
        masks = uniform_size_masks(k_mask, zs.shape[0], self.layout.n_features)
        eps = jax.random.normal(k_eps, (zs.shape[0], self.layout.latent), zs.dtype)
        return negative_elbo(params, self.layout, zs, codes, masks, eps)


@dataclasses.dataclass(frozen=True)
class _HeldOutElbo:
    """The early-stopping score: :class:`_Elbo` on the held-out rows of :func:`_held_out`, with
    their coalitions and latent draws fixed by its key."""

    layout: Layout

    def __call__(self, params, held):
        zs, codes, key = held
        return _Elbo(self.layout)(params, (zs, codes), key)


def _held_out(zs: jax.Array, codes: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The held-out rows, each repeated ``VALIDATION_MASKS`` times, and the key of their fixed draws."""
    return jnp.repeat(zs, VALIDATION_MASKS, axis=0), jnp.repeat(codes, VALIDATION_MASKS, axis=0), key


class Generative(ConditionalSampler):
    r"""Observational coalition values from a masked variational autoencoder of the data (vaeac).

    .. math::

        v_x(S) = E\bigl[f(X) \mid X_S = x_S\bigr] \approx \frac1N \sum_{n=1}^N
            f\bigl(x_S, \tilde x^{(n)}_{\bar S}\bigr), \qquad
            z^{(n)} \sim p_\psi(z \mid x_S, S),\ \tilde x^{(n)} \sim p_\theta(x \mid z^{(n)}, x_S, S),

    with the vaeac of Olsen, Glad, Jullum & Aas (2022, JMLR, "Using Shapley values and
    variational autoencoders to explain predictive models with dependent mixed features";
    Ivanov, Figurnov & Vetrov, 2019, ICLR): a full encoder :math:`q(z \mid x, S)`, a masked
    encoder :math:`p(z \mid x_S, S)` and a decoder with a Gaussian for each numeric column
    (standardised internally) and a softmax for each ``categorical`` column, trained with optax
    on the vaeac evidence lower bound over rows of ``data`` with random coalitions (a size
    uniform on ``0..M``, then a uniform subset: every size weighs the same in a Shapley value);
    see :mod:`jaxshap._estimators._density`. Training stops early on the held-out rows' loss.

    The standard normal and Gumbel draws are fixed when the masker is trained and shared by
    every coalition and row (common random numbers, as :class:`Gaussian` does; the normal ones
    in antithetic pairs), so a coalition value costs ``n_samples`` model evaluations
    (``evals_per_coalition``). :meth:`draw_conditional` draws with fresh noise from its key.

    **Cost.** Training takes ``epochs_run x (n_train // batch_size)`` optimizer steps of
    ``batch_size`` rows (:attr:`cost`) and evaluates no model.

    Args:
      data: rows ``[N, M]`` (array or DataFrame; pandas ``category`` columns are read as their
        codes and treated as categorical, their labels kept in :attr:`column_categories` so
        explainers map a DataFrame ``X``'s labels to these codes).
      key: PRNG key (``None``: ``jax.random.key(0)``) of the split, initialisation, coalitions
        and the shared draws; the same key gives the same masker.
      latent: ``L``, the latent dimension, default 8.
      hidden: hidden layer widths of each of the three networks, default ``(64, 64)``.
      n_samples: draws per coalition value, default 256.
      epochs, batch_size, learning_rate, patience, validation_fraction: as for
        :class:`Surrogate` (defaults 100, 64, 3e-3, 10, 0.1).
      categorical: indices or names of the columns that hold category codes ``0, 1, ...``.
      feature_names: optional names of the ``M`` features.

    Raises:
      ValueError: for bad sizes, a categorical column that does not hold non-negative integer
        codes, or too few rows.

    Example::

        masker = jaxshap.maskers.Generative(X_train, key=jax.random.key(0), categorical=["region"])
        expl = jaxshap.PermutationExplainer(model, masker)(X)
    """

    def __init__(
        self,
        data: Any,
        *,
        key: Any = None,
        latent: int = 8,
        hidden: Sequence[int] = (64, 64),
        n_samples: int = DEFAULT_SAMPLES,
        epochs: int = 100,
        batch_size: int = 64,
        learning_rate: float = 3e-3,
        patience: int = 10,
        validation_fraction: float = 0.1,
        categorical: Any = None,
        feature_names: Sequence[str] | None = None,
    ):
        names = column_names(data)
        self.categories_ = frame_categories(data)  # the labels behind the codes, for X's category columns
        data, found = category_codes(data)
        x = as_matrix(data, "data")
        check_finite(x, "data")
        m = x.shape[1]
        names = names if feature_names is None else list(feature_names)
        if names is not None and len(names) != m:
            raise ValueError(f"`feature_names` has {len(names)} names but `data` has {m} features.")
        self.feature_names = None if names is None else tuple(str(n) for n in names)
        cat = categorical_columns(categorical, m, self.feature_names, found)
        n_cat = _category_counts(np.asarray(x, np.float64), cat, self.feature_names)
        n_cat = tuple(max(c, len(self.categories_.get(j, ()))) for j, c in zip(cat, n_cat))  # unused levels too
        latent = integer(latent, "latent", least=1)
        self.hidden = layer_widths(hidden, "hidden")
        n_samples = integer(n_samples, "n_samples", least=1, rule=f"a positive integer ({DEFAULT_SAMPLES} is the default)")
        options = check_training(epochs, batch_size, learning_rate, patience, validation_fraction)
        self.layout = Layout(tuple(j for j in range(m) if j not in cat), cat, n_cat, latent)
        k_split, k_init, k_val, k_train, k_noise = jax.random.split(as_key(key), 5)
        train, val = holdout(k_split, x.shape[0], options.validation_fraction)
        num = np.asarray(x[train][:, np.array(self.layout.numeric, dtype=np.int32)], np.float64)
        self.x_mean, self.x_scale = jnp.asarray(num.mean(0), x.dtype), jnp.asarray(spread(num), x.dtype)
        self.probe = x[:4]
        zs, codes = self._split_columns(x)
        params = init_vaeac(k_init, self.layout, self.hidden, x.dtype)
        params, self.history_, batch = fit_network(
            _Elbo(self.layout), _HeldOutElbo(self.layout), params, (zs[train], codes[train]),
            _held_out(zs[val], codes[val], k_val), k_train, options
        )
        self.params = {name: params[name] for name in NETWORKS}
        self.validation_loss_ = min(self.history_["validation_error"])
        self.cost_ = cost_text(self.history_, len(train) // batch, batch)
        self.noise = _noise(k_noise, n_samples, self.layout, x.dtype)

    def _split_columns(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(standardised numeric columns, integer codes)`` of rows ``x [..., M]``."""
        lay = self.layout
        z = (x[..., np.array(lay.numeric, dtype=np.int32)] - self.x_mean) / self.x_scale
        return z, x[..., np.array(lay.categorical, dtype=np.int32)].astype(jnp.int32)

    # --- the masker protocol -------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self.layout.n_features

    @property
    def dtype(self):
        return self.probe.dtype

    @property
    def n_samples(self) -> int:
        return self.noise["z"].shape[0]

    @property
    def bytes_per_coalition(self) -> int:
        """The networks' activations for one coalition's draws."""
        lay = self.layout
        widths = 2 * (lay.latent + lay.width + lay.n_features) + 2 * sum(self.hidden) + 2 * lay.width
        return np.dtype(self.dtype).itemsize * widths * self.n_samples

    @property
    def probe_rows(self) -> jax.Array:
        """The first rows of ``data``."""
        return self.probe

    @property
    def cost(self) -> str:
        """The training's cost: epochs run x optimizer steps per epoch x rows per step."""
        return self.cost_

    def _draws(self, rows: jax.Array, masks: jax.Array, eps_z, eps_num, gumbel) -> jax.Array:
        """``n`` draws (``eps_z [n, L]``) given ``rows [r, M]`` and ``masks [r, M]``, in the data's
        units: one per row (``r = n``), or all of one row (``r = 1``)."""
        lay = self.layout
        zs, codes = self._split_columns(rows)
        num, cat = draw(self.params, lay, encode(lay, zs, codes), masks, eps_z, eps_num, gumbel)
        out = jnp.zeros((eps_z.shape[0], rows.shape[-1]), rows.dtype)
        out = out.at[:, np.array(lay.numeric, dtype=np.int32)].set(self.x_mean + self.x_scale * num)
        out = out.at[:, np.array(lay.categorical, dtype=np.int32)].set(cat.astype(rows.dtype))
        return jnp.where(masks, rows, out)

    def conditional_samples(self, x: jax.Array, masks: jax.Array) -> jax.Array:
        """Draws of ``X`` given ``X_S = x_S`` for each coalition: ``[C, n_samples, M]`` (shared draws)."""
        noise = self.noise

        def one(mask):
            return self._draws(x[None, :], mask[None, :], noise["z"], noise["numeric"], noise["gumbel"])

        return jax.vmap(one)(masks)

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        """One draw of the columns outside ``given`` for each row of ``rows [N, M]`` (fresh noise from ``key``)."""
        noise = _noise(key, rows.shape[0], self.layout, self.dtype, antithetic=False)
        masks = jnp.broadcast_to(jnp.asarray(given, bool), rows.shape)
        return self._draws(jnp.asarray(rows, self.dtype), masks, noise["z"], noise["numeric"], noise["gumbel"])

    def __repr__(self) -> str:
        m = "traced" if is_traced(self.x_mean) else self.n_features
        return (f"Generative(features: {m}, categorical: {list(self.layout.categorical)}, latent: {self.layout.latent}, "
                f"n_samples: {self.n_samples})")

    # --- saving --------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Save the trained networks, scales and shared draws to a NumPy ``.npz`` file (arrays and a JSON config)."""
        lay = self.layout
        config = {
            "kind": "Generative", "format_version": FORMAT_VERSION, "hidden": list(self.hidden),
            "numeric": list(lay.numeric), "categorical": list(lay.categorical), "n_categories": list(lay.n_categories),
            "latent": lay.latent, "dtype": str(np.dtype(self.dtype)),
            "feature_names": None if self.feature_names is None else list(self.feature_names),
            "history": self.history_, "validation_loss": self.validation_loss_, "cost": self.cost_,
            "categories": _saved_categories(self.column_categories),
        }
        arrays = {"x_mean": self.x_mean, "x_scale": self.x_scale, "probe": self.probe}
        arrays.update({f"noise_{k}": v for k, v in self.noise.items()})
        for name in NETWORKS:
            arrays.update(network_arrays(self.params[name], name))
        write_saved(path, config, arrays)

    @classmethod
    def load(cls, path: str) -> "Generative":
        """A Generative masker saved by :meth:`save` (the same values: the shared draws are saved).

        Raises:
          ValueError: when the file is not a saved Generative masker or has another format version.
        """
        config, arrays = read_saved(path, "Generative", FORMAT_VERSION)
        obj = cls.__new__(cls)
        dtype = np.dtype(config["dtype"])
        obj.layout = Layout(tuple(config["numeric"]), tuple(config["categorical"]), tuple(config["n_categories"]),
                            int(config["latent"]))
        obj.hidden = tuple(config["hidden"])
        obj.feature_names = None if config["feature_names"] is None else tuple(config["feature_names"])
        obj.x_mean, obj.x_scale, obj.probe = (jnp.asarray(arrays[k], dtype) for k in ("x_mean", "x_scale", "probe"))
        obj.noise = {k: jnp.asarray(arrays[f"noise_{k}"], dtype) for k in ("z", "numeric", "gumbel")}
        obj.params = {name: network_from_arrays(arrays, len(obj.hidden) + 1, name) for name in NETWORKS}
        obj.history_, obj.validation_loss_, obj.cost_ = config["history"], config["validation_loss"], config["cost"]
        obj.categories_ = {int(j): tuple(labels) for j, labels in config.get("categories") or []}
        return obj


def _noise(key: jax.Array, n: int, layout: Layout, dtype, antithetic: bool = True) -> dict:
    """Standard normal draws for ``z`` and the numeric columns (antithetic pairs) and Gumbel draws."""
    k_z, k_num, k_g = jax.random.split(key, 3)
    n_num, c_max = len(layout.numeric), max(layout.n_categories, default=1)

    def normal(k, d):
        if not antithetic:
            return jax.random.normal(k, (n, d), dtype)
        half = jax.random.normal(k, ((n + 1) // 2, d), dtype)
        return jnp.concatenate([half, -half], axis=0)[:n]

    gumbel = jax.random.gumbel(k_g, (n, len(layout.categorical), c_max), dtype)
    return {"z": normal(k_z, layout.latent), "numeric": normal(k_num, n_num), "gumbel": gumbel}


def _saved_categories(categories: dict[int, tuple]) -> list | None:
    """``[[column, labels], ...]`` for the saved JSON, or ``None`` when a label is not a JSON
    string, number or bool (the loaded masker then takes codes only in those columns)."""
    plain = all(isinstance(v, (str, int, float, bool)) for labels in categories.values() for v in labels)
    return [[j, list(labels)] for j, labels in sorted(categories.items())] if plain else None


def _category_counts(x: np.ndarray, columns: tuple[int, ...], names) -> tuple[int, ...]:
    """The number of categories ``max code + 1`` of each categorical column.

    Raises:
      ValueError: naming ``categorical`` and the column when it holds other than non-negative integers.
    """
    counts = []
    for j in columns:
        col = x[:, j]
        if np.any(col < 0) or not np.array_equal(col, np.round(col)):
            label = repr(names[j]) if names is not None else str(j)
            raise ValueError(
                f"`categorical` lists column {label}, but it holds values that are not non-negative integer codes "
                "(encode categories as 0, 1, 2, ...)."
            )
        counts.append(int(col.max()) + 1)
    return tuple(counts)
