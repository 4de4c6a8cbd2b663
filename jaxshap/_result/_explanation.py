"""The :class:`Explanation` result: a pytree of JAX arrays with static metadata, read as NumPy.

Indexing, reductions, orders, sampling and cohorts follow ``shap.Explanation``: ``expl[:, "bmi"]``,
``expl[..., 1]``, ``expl.abs.mean(0)``, ``expl.argsort``, ``expl.percentile(95, 0)``,
``expl.hclust()``, ``expl.sample(100)``, ``expl.cohorts(3)``. ``to_shap()`` converts for
``shap.plots`` (``jaxshap.plots`` converts for you).
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

import jax
import numpy as np

from .._core._inputs import is_traced
from .._core._validate import integer
from ._cohorts import Cohorts, auto_cohorts, hclust_order
from ._arrays import FEATURES, OUTPUTS, ROWS, StaticArray, apply, select, to_host
from ._interop import hook_shap


def _default_axes(ndim: int, has_outputs: bool) -> tuple[str, ...]:
    """What the axes of ``values`` hold, from its rank (and whether outputs are named)."""
    if ndim >= 3:
        return (ROWS, FEATURES, OUTPUTS)
    if ndim == 2:
        return (FEATURES, OUTPUTS) if has_outputs else (ROWS, FEATURES)
    return (FEATURES,) if ndim == 1 else ()


def _leaf(name: str, doc: str) -> property:
    """A public array field: the stored leaf, read through :func:`to_host` (NumPy outside a trace)."""
    key = "_" + name

    def get(self):
        return to_host(getattr(self, key, None))

    def set_(self, value):
        setattr(self, key, value)

    return property(get, set_, doc=doc)


def _try(fn: str, a: Any, *args: Any, **kwargs: Any) -> Any:
    """:func:`apply` on ``data``, or ``None`` where the data are not numbers (as shap does)."""
    try:
        return apply(fn, a, *args, **kwargs)
    except (TypeError, ValueError):
        return None


@jax.tree_util.register_pytree_node_class
class Explanation:
    """Shapley values for a batch of rows, with what is needed to read and plot them.

    **JAX inside, NumPy outside.** The arrays (``values``, ``base_values``, ``data``, ``stderr``,
    ``interaction_values``) are stored as computed, JAX arrays from the explainers, and they are
    the pytree leaves: an ``Explanation`` can be returned from ``jax.jit``, mapped with
    ``jax.tree_util`` and differentiated through, and inside ``jit``/``grad``/``vmap`` the
    attributes are tracers. Outside traced code the attributes are NumPy (read-only views of the
    leaves, no copy on the CPU; 0-d ones are NumPy scalars), so what a user hands to NumPy, pandas
    or shap's functions behaves as NumPy: ``X[(expl.values.sum(1) + expl.base_values) > 0]``,
    ``shap.force_plot(ex.expected_value, expl.values[0], X.iloc[0])``. The methods compute with
    NumPy on concrete arrays (as ``shap.Explanation``, bit for bit) and with ``jax.numpy`` on
    traced ones, and store their results as JAX leaves again. One exception: a result sharded
    over several devices stays a JAX array where it lies (``np.asarray`` gathers it);
    ``jax.tree_util.tree_leaves(expl)`` gives the JAX leaves of any result.

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
        rows sum to ``values``; ``[n] + [M] * k (+ [K])`` for ``interactions=k``.
      display_data: ``[n, M]`` NumPy values shown in plots in place of ``data`` (category names,
        unscaled values), or ``None``; static metadata, set it as in shap
        (``expl.display_data = X_display.values``); indexing keeps it aligned with ``data``.
      feature_names: list of ``M`` feature names (one ``str`` after picking one feature).
      output_names: list of ``K`` output names, or ``None`` for a single output.

    Like ``shap.Explanation``, it can be indexed by row, feature (position, name, or a one-element
    ``Explanation`` such as ``expl.abs.mean(0).argsort[-1]``) and output; reduced with
    :meth:`mean`, :meth:`sum`, :meth:`max`, :meth:`min`, :meth:`percentile` and :attr:`abs`;
    ordered with :attr:`argsort`, :attr:`flip` and :meth:`hclust`; subsampled with
    :meth:`sample`; split with :meth:`cohorts`; and written to and read from a ``.npz`` file with
    :meth:`save` and :meth:`load`.
    """

    values = _leaf("values", "SHAP values, ``[n, M]`` or ``[n, M, K]``.")
    base_values = _leaf("base_values", "Base values, ``[n]`` or ``[n, K]``.")
    data = _leaf("data", "The explained rows, ``[n, M]``.")
    stderr = _leaf("stderr", "Standard errors of ``values`` (sampling estimators), or ``None``.")
    interaction_values = _leaf("interaction_values", "Pairwise interaction values, or ``None``.")

    def __init__(
        self,
        values: Any,
        base_values: Any,
        data: Any,
        stderr: Any = None,
        feature_names: Sequence[str] | None = None,
        output_names: Sequence[str] | None = None,
        interaction_values: Any = None,
        display_data: Any = None,
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
        self._history = ()
        self.display_data = display_data

    @property
    def feature_names(self) -> list[str] | str:
        return self._feature_names if isinstance(self._feature_names, str) else list(self._feature_names)

    @property
    def output_names(self) -> list[str] | str | None:
        if self._output_names is None or isinstance(self._output_names, str):
            return self._output_names
        return list(self._output_names)

    @property
    def display_data(self) -> np.ndarray | None:
        display = getattr(self, "_display", None)
        return None if display is None else display.array

    @display_data.setter
    def display_data(self, value: Any) -> None:
        if value is None:
            self._display = None
            return
        value = np.asarray(value.values if hasattr(value, "columns") else value)
        if value.shape != np.shape(self._data):
            raise ValueError(f"`display_data` must have the shape of `data` {np.shape(self._data)}; got {value.shape}.")
        self._display = StaticArray(value)

    _SHAP_ONLY = frozenset(
        {"error_std", "clustering", "hierarchical_values", "lower_bounds", "upper_bounds", "main_effects",
         "instance_names", "output_indexes", "op_history", "compute_time"}
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
        return tuple(np.shape(self._values))

    def __len__(self) -> int:
        return self.shape[0]

    def tree_flatten(self):
        children = (self._values, self._base_values, self._data, self._stderr, getattr(self, "_interaction_values", None))
        aux = (self._feature_names, self._output_names, self._axes, getattr(self, "_history", ()), getattr(self, "_display", None))
        return children, aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj._values, obj._base_values, obj._data, obj._stderr, obj._interaction_values = children
        obj._feature_names, obj._output_names, obj._axes, obj._history, obj._display = aux
        return obj

    # --- shap-style indexing ----------------------------------------------------------------
    def _axes_of(self, what: str) -> tuple[str, ...]:
        drop = {"base_values": FEATURES, "data": OUTPUTS}.get(what)
        return tuple(a for a in self._axes if a != drop)

    def _with(self, axes: tuple[str, ...], op: tuple | None = None, **arrays: Any) -> "Explanation":
        """A copy with new leaves and axes, ``op`` (``(name, args, kwargs, collapsed rows)``) added to
        the history shap's plots read (attributes other engineers add are kept as they are)."""
        new = copy.copy(self)
        for name, value in arrays.items():
            setattr(new, "_" + name, value)
        new._axes = axes
        if op is not None:
            name, args, kwargs, collapsed = op
            new._history = getattr(self, "_history", ()) + ((name, self.shape, args, tuple(kwargs.items()), collapsed),)
        return new

    def __getitem__(self, index: Any) -> "Explanation":
        """Select rows, features and outputs as ``shap.Explanation`` does.

        ``expl[0]`` (one row), ``expl[:10]``, ``expl[:, "bmi"]`` (one feature, by name or
        position), ``expl[:, ["bmi", "age"]]``, ``expl[..., 1]`` or ``expl[:, :, "setosa"]`` (one
        output), ``expl[:, expl.abs.mean(0).argsort[-1]]`` (the feature an ``Explanation`` holds).
        Each axis is indexed on its own (orthogonally): ``expl[[0, 1], [2, 3]]`` keeps rows 0 and
        1 and features 2 and 3. Integer positions drop their axis; metadata follows.

        Raises:
          IndexError: for too many indices or an unknown feature or output name.
        """
        return select(self, index)

    # --- reductions ---------------------------------------------------------------------------
    def _reduce(self, fname: str, axis: int | None, *args: Any) -> "Explanation":
        """``numpy.<fname>`` over one axis of ``values`` (every axis for ``None``); ``base_values``,
        ``data`` follow where they have that axis (data that are not numbers become ``None``)."""
        if axis is None:
            labels = self._axes
        else:
            n = len(self._axes)
            axis = integer(axis, "axis", least=-n, most=n - 1, rule=f"one of the values' axes 0..{n - 1} {self._axes}")
            labels = (self._axes[axis],)

        def reduce(a, what):
            axes = self._axes_of(what)
            here = [axes.index(label) for label in labels if label in axes]
            if a is None or not here:
                return a
            return _try(fname, a, *args, axis=None if axis is None else here[0])

        record = ((axis,), {}, axis == 0) if fname == "percentile" else ((), {"axis": axis}, axis == 0)
        new = self._with(
            tuple(a for a in self._axes if a not in labels),
            (fname,) + record,
            values=apply(fname, self._values, *args, axis=axis),
            base_values=reduce(self._base_values, "base_values"),
            data=reduce(self._data, "data"),
            stderr=None,
            interaction_values=None,
        )
        if ROWS in labels or FEATURES in labels:
            new._display = None
        if OUTPUTS in labels:
            new._output_names = None
        if FEATURES in labels:
            new._feature_names = ()
        return new

    def mean(self, axis: int) -> "Explanation":
        """Mean over an axis of ``values`` (rows: 0); ``base_values`` and ``data`` follow where
        they have that axis. ``expl.abs.mean(0)`` is the global importance of ``shap.plots.bar``.
        ``stderr`` is dropped (it is not that of the reduced quantity)."""
        return self._reduce("mean", axis)

    def sum(self, axis: int | None = None) -> "Explanation":
        """Sum over an axis of ``values`` (every axis for ``None``; see :meth:`mean`).

        ``expl.sum(1)`` keeps one value per row (with the rows' base values), what
        ``shap.plots.heatmap(expl, instance_order=expl.sum(1))`` orders the rows by.
        """
        return self._reduce("sum", axis)

    def max(self, axis: int) -> "Explanation":
        """Maximum over an axis of ``values`` (see :meth:`mean`)."""
        return self._reduce("max", axis)

    def min(self, axis: int) -> "Explanation":
        """Minimum over an axis of ``values`` (see :meth:`mean`)."""
        return self._reduce("min", axis)

    def percentile(self, q: float, axis: int | None = None) -> "Explanation":
        """The ``q``-th percentile (0..100, NumPy's linear interpolation) over an axis of ``values``
        and ``data`` (every axis for ``None``), as shap's; ``base_values`` follow as in :meth:`mean`.

        ``age = expl[:, "age"]; shap.plots.scatter(age, xmin=age.percentile(1))`` clips the x
        axis (which reads ``data``) at the first percentile of the ages.
        """
        return self._reduce("percentile", axis, q)

    # --- element-wise transforms and orders -----------------------------------------------------
    def _transform(self, fname: str, **arrays: Any) -> "Explanation":
        return self._with(self._axes, (fname, (), {}, False), **arrays)

    @property
    def abs(self) -> "Explanation":
        """The same explanation with ``|values|`` and ``|data|`` (base values unchanged), as shap's."""
        return self._transform("abs", values=apply("abs", self._values), data=_try("abs", self._data))

    @property
    def argsort(self) -> "Explanation":
        """``numpy.argsort`` of ``values`` and ``data`` along their last axis, as shap's: on
        ``expl.abs.mean(0)`` the features from least to most important, so
        ``expl.abs.mean(0).argsort[-1]`` indexes the most important one. Names and base values are
        unchanged (the values are positions now, not attributions)."""
        return self._transform(
            "argsort", values=apply("argsort", self._values), data=_try("argsort", self._data),
            stderr=None, interaction_values=None,
        )

    @property
    def flip(self) -> "Explanation":
        """``numpy.flip`` of ``values`` and ``data`` over every axis, as shap's:
        ``expl.abs.mean(0).argsort.flip`` lists the features from most to least important. Names
        and base values are unchanged."""
        return self._transform(
            "flip", values=apply("flip", self._values), data=_try("flip", self._data),
            stderr=None, interaction_values=None,
        )

    def hclust(self, metric: str = "sqeuclidean", axis: int = 0) -> np.ndarray:
        """An order of the rows (``axis=0``) or features (``axis=1``) that keeps similar ones together.

        The leaf order of a complete-linkage clustering of the ``values`` under ``metric``, with
        SciPy's optimal-leaf-ordering flips: the order ``shap.Explanation.hclust`` returns (see
        :mod:`jaxshap._result._cohorts`; NumPy only). ``shap.plots.heatmap`` orders its columns
        this way by default.

        Args:
          metric: ``"sqeuclidean"`` (shap's default), ``"euclidean"``, ``"cityblock"``,
            ``"chebyshev"``, ``"cosine"`` or ``"correlation"``.
          axis: 0 to order rows, 1 to order features.

        Returns:
          A NumPy array of positions.

        Raises:
          ValueError: for values that are not 2-D (pick an output first), or an unknown metric.
          TypeError: inside ``jit``/``grad`` (an order is computed on the host).
        """
        if is_traced(self._values):
            raise TypeError("hclust() orders concrete values on the host; call it outside jax.jit/grad.")
        values = np.asarray(self._values)
        if values.ndim != 2:
            raise ValueError(f"hclust() orders 2-D values; these have shape {values.shape} (pick an output first).")
        integer(axis, "axis", least=0, most=1)
        return hclust_order(values.T if axis == 1 else values, metric)

    # --- rows: samples and cohorts --------------------------------------------------------------
    def sample(self, max_samples: int, replace: bool = False, random_state: int = 0) -> "Explanation":
        """A random subset of rows, the same rows ``shap.Explanation.sample`` draws.

        Args:
          max_samples: rows to draw; at most the number of rows there are (all of them, shuffled,
            when fewer exist), with or without replacement, as shap.
          replace: draw with replacement.
          random_state: seed of NumPy's ``RandomState``, as shap.
        """
        if ROWS not in self._axes:
            raise ValueError("sample() draws rows, but this Explanation has no row axis (it was reduced or indexed).")
        n = self.shape[self._axes.index(ROWS)]
        rng = np.random.RandomState(random_state)
        rows = rng.choice(n, size=min(int(max_samples), n), replace=replace)
        new = self[(np.asarray(rows),)]
        # the history names the call, as shap 0.54's op_history does (shap 0.51 kept "__getitem__")
        new._history = getattr(self, "_history", ()) + (("sample", self.shape, (max_samples,), (), False),)
        return new

    def cohorts(self, cohorts: Any) -> Cohorts:
        """Split the rows into named groups, as ``shap.Explanation.cohorts``.

        Args:
          cohorts: an int ``n``: at most ``n`` groups of rows with similar SHAP values, found by a
            best-first regression tree on the data (see :mod:`jaxshap._result._cohorts`), named by their
            paths (``"bmi < 0.03 & age >= 0.1"``); or one label per row (a list, tuple or array;
            groups by label, named ``str(label)``).

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
            n = integer(cohorts, "cohorts", least=1, rule="a positive number of groups")
            groups = auto_cohorts(np.asarray(self._data), np.asarray(self._values), list(self._feature_names), n)
            return Cohorts({name: self[(rows,)] for name, rows in groups.items()})
        labels = np.asarray(cohorts)
        if labels.shape != (len(self),):
            raise ValueError(f"`cohorts` must be an int or one label per row ({len(self)}); got shape {labels.shape}.")
        return Cohorts({str(name): self[(labels == name,)] for name in np.unique(labels)})

    # --- saving and converting ------------------------------------------------------------------
    def save(self, file: Any) -> None:
        """Write the arrays and names to a NumPy ``.npz`` file (no pickle), for :meth:`load`;
        ``display_data`` holding Python objects is written as text."""
        from ._interop import save

        save(self, file)

    @classmethod
    def load(cls, file: Any) -> "Explanation":
        """Read an :class:`Explanation` written by :meth:`save` (arrays come back as JAX arrays)."""
        from ._interop import load

        return load(cls, file)

    def __repr__(self) -> str:
        kind = "exact" if self._stderr is None else "sampled"
        return (
            f"Explanation(values: {self.shape}, base_values: {tuple(np.shape(self._base_values))}, "
            f"features: {1 if isinstance(self._feature_names, str) else len(self._feature_names)}, "
            f"axes: {self._axes}, {kind})"
        )

    def to_shap(self, interactions: bool = False):
        """Convert to a ``shap.Explanation`` of NumPy arrays, ready for ``shap.plots``.

        Multi-output results keep the output axis last (``[n, M, K]``); slice one output with
        ``expl.to_shap()[:, :, k]`` before plotting, as with shap's own results. One row
        (``expl[i].to_shap()``) converts too, ready for ``shap.plots.waterfall``; ``stderr``
        becomes shap's ``error_std``, ``display_data`` is kept, and the operations applied
        (``abs``, ``mean``, ``argsort``, ...) become shap's ``op_history``, from which
        ``shap.plots.bar`` writes its axis label and cohort sizes and ``shap.plots.heatmap``
        tells an order from values to sort by.

        With ``interaction_values``, their diagonal becomes shap's ``main_effects``; with
        ``interactions=True`` the shap ``Explanation`` holds the ``[n, M, M]`` interaction values
        as its ``values``, as shap's ``ExactExplainer(..., interactions=2)`` returns them (for
        ``shap.dependence_plot`` with a pair, pass ``expl.interaction_values``).

        Args:
          interactions: put the interaction values, not the attributions, in ``values``.

        Raises:
          ValueError: ``interactions=True`` without interaction values.
          ImportError: when shap is not installed (``pip install 'jaxshap[plots]'``).
        """
        from ._interop import to_shap

        return to_shap(self, interactions)


hook_shap()  # shap's own plots take Explanations (jaxshap._result._interop)
