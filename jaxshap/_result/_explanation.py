"""The :class:`Explanation` result: a pytree of JAX arrays with static metadata.

Indexing, reductions, sampling and cohorts follow ``shap.Explanation``: ``expl[:, "bmi"]``,
``expl[..., 1]``, ``expl.abs.mean(0)``, ``expl.sample(100)``, ``expl.cohorts(3)``. The result
stays a jaxshap ``Explanation`` (JAX arrays); ``to_shap()`` converts for ``shap.plots``.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._cohorts import Cohorts, auto_cohorts

ROWS, FEATURES, OUTPUTS = "rows", "features", "outputs"


def _default_axes(ndim: int, has_outputs: bool) -> tuple[str, ...]:
    """What the axes of ``values`` hold, from its rank (and whether outputs are named)."""
    if ndim >= 3:
        return (ROWS, FEATURES, OUTPUTS)
    if ndim == 2:
        return (FEATURES, OUTPUTS) if has_outputs else (ROWS, FEATURES)
    return (FEATURES,) if ndim == 1 else ()


def _names_index(index: Any, names: Any, what: str) -> Any:
    """Turn names (a str or a list of str) into positions in ``names``; other indices pass."""
    if isinstance(index, str) or (isinstance(index, (list, tuple)) and index and all(isinstance(i, str) for i in index)):
        if names is None or isinstance(names, str):
            raise IndexError(f"this Explanation has no {what} names to look {index!r} up in.")
        names = list(names)

        def position(name):
            if name not in names:
                raise IndexError(f"{name!r} is not one of the {what} names {names}.")
            return names.index(name)

        return position(index) if isinstance(index, str) else np.asarray([position(n) for n in index])
    if isinstance(index, list):
        return np.asarray(index)
    return index


def _is_scalar(index: Any) -> bool:
    return isinstance(index, (int, np.integer)) or (hasattr(index, "ndim") and index.ndim == 0 and not isinstance(index, slice))


def _take(a: Any, axes: tuple[str, ...], picks: dict[str, Any]) -> Any:
    """Index ``a`` (whose axes are ``axes``) one axis at a time (orthogonal, not broadcast)."""
    if a is None:
        return None
    for pos in reversed(range(len(axes))):
        ix = picks.get(axes[pos], slice(None))
        if isinstance(ix, slice) and ix == slice(None):
            continue
        a = a[(slice(None),) * pos + (ix,)]
    return a


@jax.tree_util.register_pytree_node_class
class Explanation:
    """Shapley values for a batch of rows, with what is needed to read and plot them.

    The arrays are pytree leaves (so an ``Explanation`` can be returned from ``jax.jit`` and
    differentiated through); ``feature_names`` and ``output_names`` are static metadata.
    Efficiency holds: ``values.sum(axis=1) + base_values == model(data)``.

    Attributes:
      values: ``[n, M]`` for a single-output model, ``[n, M, K]`` for ``K`` outputs.
      base_values: ``[n]`` or ``[n, K]``: the value of the empty coalition, ``E[f(X)]``.
      data: ``[n, M]``: the explained rows.
      stderr: standard errors of ``values`` for sampling estimators; ``None`` when exact.
      interaction_values: ``[n, M, M]`` (or ``[n, M, M, K]``) pairwise interaction values when
        asked for (``interactions=True``), else ``None``: symmetric, the diagonal holds the main
        effects and each pair's interaction is split evenly between ``[i, j]`` and ``[j, i]``,
        so for the efficient indices (shap's SHAP interaction values, k-SII, STII, FSII) the
        rows sum to ``values``.
      feature_names: list of ``M`` feature names (one ``str`` after picking one feature).
      output_names: list of ``K`` output names, or ``None`` for a single output.

    Like ``shap.Explanation``, it can be indexed by row, feature (position or name) and output
    (position or name), reduced with :meth:`mean`, :meth:`sum`, :meth:`max`, :meth:`min` and
    :attr:`abs`, subsampled with :meth:`sample`, split with :meth:`cohorts`, and written to and
    read from a ``.npz`` file with :meth:`save` and :meth:`load`.
    """

    def __init__(
        self,
        values: Any,
        base_values: Any,
        data: Any,
        stderr: Any = None,
        feature_names: Sequence[str] | None = None,
        output_names: Sequence[str] | None = None,
        interaction_values: Any = None,
    ):
        self.values = values
        self.base_values = base_values
        self.data = data
        self.stderr = stderr
        self.interaction_values = interaction_values
        n_features = np.shape(values)[1] if np.ndim(values) >= 2 else np.shape(values)[-1]
        if feature_names is None:
            feature_names = [f"Feature {j}" for j in range(n_features)]
        self._feature_names = feature_names if isinstance(feature_names, str) else tuple(str(n) for n in feature_names)
        if output_names is not None and not isinstance(output_names, str):
            output_names = tuple(str(n) for n in output_names)
        self._output_names = output_names
        self._axes = _default_axes(np.ndim(values), output_names is not None)

    @property
    def feature_names(self) -> list[str] | str:
        return self._feature_names if isinstance(self._feature_names, str) else list(self._feature_names)

    @property
    def output_names(self) -> list[str] | str | None:
        if self._output_names is None or isinstance(self._output_names, str):
            return self._output_names
        return list(self._output_names)

    _SHAP_ONLY = frozenset(
        {"display_data", "error_std", "clustering", "hierarchical_values", "lower_bounds", "upper_bounds",
         "main_effects", "instance_names", "output_indexes", "op_history", "compute_time", "hclust"}
    )

    def __getattr__(self, name: str) -> Any:
        # only reached for missing attributes: the shap.Explanation fields shap's plots read
        if name in Explanation._SHAP_ONLY:
            raise AttributeError(
                f"jaxshap.Explanation has no {name!r}: it is not a shap.Explanation. shap's plots need one: "
                "pass expl.to_shap() (or call the same plot from jaxshap.plots, which converts for you)."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.values))

    def __len__(self) -> int:
        return self.shape[0]

    def tree_flatten(self):
        children = (self.values, self.base_values, self.data, self.stderr, getattr(self, "interaction_values", None))
        return children, (self._feature_names, self._output_names, self._axes)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.values, obj.base_values, obj.data, obj.stderr, obj.interaction_values = children
        obj._feature_names, obj._output_names, obj._axes = aux
        return obj

    # --- shap-style indexing, reductions and groups ------------------------------------------
    def _axes_of(self, what: str) -> tuple[str, ...]:
        drop = {"base_values": FEATURES, "data": OUTPUTS}.get(what)
        return tuple(a for a in self._axes if a != drop)

    def _with(self, axes: tuple[str, ...], **arrays: Any) -> "Explanation":
        """A copy with new arrays and axes (attributes other engineers add are kept as they are)."""
        new = copy.copy(self)
        for name, value in arrays.items():
            setattr(new, name, value)
        new._axes = axes
        return new

    def __getitem__(self, index: Any) -> "Explanation":
        """Select rows, features and outputs as ``shap.Explanation`` does.

        ``expl[0]`` (one row), ``expl[:10]``, ``expl[:, "bmi"]`` (one feature, by name or
        position), ``expl[:, ["bmi", "age"]]``, ``expl[..., 1]`` or ``expl[:, :, "setosa"]`` (one
        output). Each axis is indexed on its own (orthogonally): ``expl[[0, 1], [2, 3]]`` keeps rows
        0 and 1 and features 2 and 3. Integer positions drop their axis; metadata follows.

        Raises:
          IndexError: for too many indices or an unknown feature or output name.
        """
        index = index if isinstance(index, tuple) else (index,)
        if sum(i is Ellipsis for i in index) > 1:
            raise IndexError("an index can only have a single ellipsis ('...').")
        if Ellipsis in [i for i in index if i is Ellipsis]:
            at = next(k for k, i in enumerate(index) if i is Ellipsis)
            fill = len(self._axes) - (len(index) - 1)
            index = index[:at] + (slice(None),) * max(fill, 0) + index[at + 1 :]
        if len(index) > len(self._axes):
            raise IndexError(
                f"too many indices: this Explanation's values have {len(self._axes)} axes {self._axes}; got {len(index)}."
            )
        picks = {}
        for axis, ix in zip(self._axes, index):
            if axis == FEATURES:
                ix = _names_index(ix, self._feature_names, "feature")
            elif axis == OUTPUTS:
                ix = _names_index(ix, self._output_names, "output")
            elif isinstance(ix, list):
                ix = np.asarray(ix)
            if isinstance(ix, str):
                raise IndexError(f"rows are indexed by position, not by name; got {ix!r}.")
            picks[axis] = ix
        kept = tuple(a for a in self._axes if not _is_scalar(picks.get(a, slice(None))))
        new = self._with(
            kept,
            values=_take(self.values, self._axes, picks),
            base_values=_take(self.base_values, self._axes_of("base_values"), picks),
            data=_take(self.data, self._axes_of("data"), picks),
            stderr=_take(self.stderr, self._axes, picks),
        )
        extra = getattr(self, "interaction_values", None)
        if extra is not None:  # [n, M, M(, K)]: rows and outputs follow; a feature pick drops them
            if FEATURES in picks and not (isinstance(picks[FEATURES], slice) and picks[FEATURES] == slice(None)):
                new.interaction_values = None
            else:
                axes = tuple(a for a in self._axes if a != FEATURES)
                lead = (ROWS,) if ROWS in self._axes else ()
                tail = (OUTPUTS,) if OUTPUTS in self._axes else ()
                full = lead + ("f1", "f2") + tail
                new.interaction_values = _take(extra, full, {a: picks[a] for a in axes if a in picks})
        if FEATURES in picks:
            names = np.asarray(self._feature_names, dtype=object) if not isinstance(self._feature_names, str) else None
            if names is not None:
                sel = names[picks[FEATURES]]
                new._feature_names = str(sel) if _is_scalar(picks[FEATURES]) else tuple(str(n) for n in sel)
        if OUTPUTS in picks and self._output_names is not None and not isinstance(self._output_names, str):
            sel = np.asarray(self._output_names, dtype=object)[picks[OUTPUTS]]
            new._output_names = str(sel) if _is_scalar(picks[OUTPUTS]) else tuple(str(n) for n in sel)
        return new

    def _reduce(self, fname: str, axis: int) -> "Explanation":
        if not isinstance(axis, (int, np.integer)) or not -len(self._axes) <= axis < len(self._axes):
            raise ValueError(f"`axis` must be one of the values' axes 0..{len(self._axes) - 1} {self._axes}; got {axis!r}.")
        label = self._axes[axis]
        fn = getattr(jnp, fname)

        def reduce(a, what):
            if a is None:
                return None
            axes = self._axes_of(what)
            return fn(a, axis=axes.index(label)) if label in axes else a

        new = self._with(
            tuple(a for a in self._axes if a != label),
            values=fn(self.values, axis=axis),
            base_values=reduce(self.base_values, "base_values"),
            data=reduce(self.data, "data"),
            stderr=None,
        )
        if getattr(self, "interaction_values", None) is not None:
            new.interaction_values = None
        if label == OUTPUTS:
            new._output_names = None
        if label == FEATURES:
            new._feature_names = ()
        return new

    def mean(self, axis: int) -> "Explanation":
        """Mean over an axis of ``values`` (rows: 0); ``base_values`` and ``data`` follow where
        they have that axis. ``expl.abs.mean(0)`` is the global importance of ``shap.plots.bar``.
        ``stderr`` is dropped (it is not that of the reduced quantity)."""
        return self._reduce("mean", axis)

    def sum(self, axis: int) -> "Explanation":
        """Sum over an axis of ``values`` (see :meth:`mean`)."""
        return self._reduce("sum", axis)

    def max(self, axis: int) -> "Explanation":
        """Maximum over an axis of ``values`` (see :meth:`mean`)."""
        return self._reduce("max", axis)

    def min(self, axis: int) -> "Explanation":
        """Minimum over an axis of ``values`` (see :meth:`mean`)."""
        return self._reduce("min", axis)

    @property
    def abs(self) -> "Explanation":
        """The same explanation with ``|values|`` and ``|data|`` (base values unchanged), as shap's."""
        return self._with(self._axes, values=jnp.abs(self.values), data=None if self.data is None else jnp.abs(self.data))

    def sample(self, max_samples: int, replace: bool = False, random_state: int = 0) -> "Explanation":
        """A random subset of rows, the same rows ``shap.Explanation.sample`` draws.

        Args:
          max_samples: rows to draw (all of them, shuffled, when fewer exist and ``replace`` is False).
          replace: draw with replacement.
          random_state: seed of NumPy's ``RandomState``, as shap.
        """
        if ROWS not in self._axes:
            raise ValueError("sample() draws rows, but this Explanation has no row axis (it was reduced or indexed).")
        n = self.shape[self._axes.index(ROWS)]
        rng = np.random.RandomState(random_state)
        rows = rng.choice(n, size=min(int(max_samples), n) if not replace else int(max_samples), replace=replace)
        return self[(np.asarray(rows),)]

    def cohorts(self, cohorts: Any) -> Cohorts:
        """Split the rows into named groups, as ``shap.Explanation.cohorts``.

        Args:
          cohorts: an int ``n``: at most ``n`` groups of rows with similar SHAP values, found by a
            best-first regression tree on the data (see :mod:`jaxshap._result._cohorts`), named by their
            paths (``"bmi < 0.03 & age >= 0.1"``); or one label per row (groups by label).

        Returns:
          A :class:`jaxshap._result._cohorts.Cohorts` (``.cohorts`` is the dict; ``.to_shap()`` for shap).

        Raises:
          ValueError: for a multi-output explanation (pick an output first: ``expl[..., k]``).
        """
        if OUTPUTS in self._axes or self._axes[:1] != (ROWS,):
            raise ValueError(
                "cohorts() needs rows of a single output; pick the output first, as expl[..., k].cohorts(n)."
            )
        if isinstance(cohorts, (int, np.integer)) and not isinstance(cohorts, bool):
            if cohorts < 1:
                raise ValueError(f"`cohorts` must be a positive number of groups; got {cohorts}.")
            groups = auto_cohorts(self.data, self.values, list(self._feature_names), int(cohorts))
            return Cohorts({name: self[(rows,)] for name, rows in groups.items()})
        labels = np.asarray(cohorts)
        if labels.shape != (len(self),):
            raise ValueError(f"`cohorts` must be an int or one label per row ({len(self)}); got shape {labels.shape}.")
        return Cohorts({str(name): self[(np.flatnonzero(labels == name),)] for name in np.unique(labels)})

    # --- saving -----------------------------------------------------------------------------
    def save(self, file: Any) -> None:
        """Write the arrays and names to a NumPy ``.npz`` file (no pickle), for :meth:`load`."""
        arrays = {"values": np.asarray(self.values), "base_values": np.asarray(self.base_values), "data": np.asarray(self.data)}
        if self.stderr is not None:
            arrays["stderr"] = np.asarray(self.stderr)
        if getattr(self, "interaction_values", None) is not None:
            arrays["interaction_values"] = np.asarray(self.interaction_values)
        arrays["feature_names"] = np.asarray(self._feature_names, dtype=str)
        if self._output_names is not None:
            arrays["output_names"] = np.asarray(self._output_names, dtype=str)
        arrays["axes"] = np.asarray(self._axes, dtype=str)
        np.savez(file, **arrays)

    @classmethod
    def load(cls, file: Any) -> "Explanation":
        """Read an :class:`Explanation` written by :meth:`save` (arrays come back as JAX arrays)."""
        with np.load(file, allow_pickle=False) as z:
            get = lambda k: jnp.asarray(z[k]) if k in z.files else None
            names = z["feature_names"]
            outputs = z["output_names"] if "output_names" in z.files else None
            obj = cls(
                get("values"),
                get("base_values"),
                get("data"),
                get("stderr"),
                str(names) if names.ndim == 0 else [str(n) for n in names],
                None if outputs is None else (str(outputs) if outputs.ndim == 0 else [str(n) for n in outputs]),
            )
            obj._axes = tuple(str(a) for a in z["axes"])
            if "interaction_values" in z.files:
                obj.interaction_values = get("interaction_values")
        return obj

    def __repr__(self) -> str:
        kind = "exact" if self.stderr is None else "sampled"
        return (
            f"Explanation(values: {self.shape}, base_values: {tuple(np.shape(self.base_values))}, "
            f"features: {1 if isinstance(self._feature_names, str) else len(self._feature_names)}, "
            f"axes: {self._axes}, {kind})"
        )

    def to_shap(self, interactions: bool = False):
        """Convert to a ``shap.Explanation`` of NumPy arrays, ready for ``shap.plots``.

        Multi-output results keep the output axis last (``[n, M, K]``); slice one output with
        ``expl.to_shap()[:, :, k]`` before plotting, as with shap's own results. One row
        (``expl[i].to_shap()``) converts too, ready for ``shap.plots.waterfall``; ``stderr``
        becomes shap's ``error_std``.

        With ``interaction_values``, their diagonal becomes shap's ``main_effects``; with
        ``interactions=True`` the shap ``Explanation`` holds the ``[n, M, M]`` interaction values
        as its ``values``, as shap's ``ExactExplainer(..., interactions=2)`` returns them (for
        ``shap.dependence_plot`` with a pair, pass ``np.asarray(expl.interaction_values)``).

        Args:
          interactions: put the interaction values, not the attributions, in ``values``.

        Raises:
          ValueError: ``interactions=True`` without interaction values.
          ImportError: when shap is not installed (``pip install 'jaxshap[plots]'``).
        """
        inter = getattr(self, "interaction_values", None)
        if interactions and inter is None:
            raise ValueError(
                "to_shap(interactions=True) needs interaction values: explain with "
                "explainer(X, interactions=True) first."
            )
        try:
            import shap
        except ImportError as err:
            raise ImportError(
                "Explanation.to_shap() needs shap: install it with `pip install 'jaxshap[plots]'`."
            ) from err
        kwargs = {}
        if self._output_names is not None and not isinstance(self._output_names, str):
            kwargs["output_names"] = self.output_names
        if self.stderr is not None and not interactions:
            kwargs["error_std"] = np.asarray(self.stderr)
        if inter is not None and not interactions and FEATURES in self._axes:
            inter = np.asarray(inter)
            axis = self._axes.index(FEATURES)
            kwargs["main_effects"] = np.moveaxis(np.diagonal(inter, axis1=axis, axis2=axis + 1), -1, axis)
        base = np.asarray(self.base_values)
        if base.ndim == 0:  # one row of a single-output result: a scalar, as shap's own expl[i]
            base = base[()]
        return shap.Explanation(
            values=np.asarray(inter if interactions else self.values),
            base_values=base,
            data=np.asarray(self.data),
            feature_names=self.feature_names,
            **kwargs,
        )
