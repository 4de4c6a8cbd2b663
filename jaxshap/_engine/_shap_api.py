"""The calls shap users write on an explainer: ``shap_values``, ``save`` and ``load``, and
shap's spellings of the constructors' and calls' arguments.

Every explainer (model-agnostic, linear, tree) mixes this in; each defines ``__call__`` (which
returns an :class:`~jaxshap.Explanation`) and ``expected_value``, which reads as NumPy here. What
shap users write and
jaxshap spells otherwise is translated here, once for every explainer (see
:class:`ShapConstruction` and :func:`shap_call_options`):

* ``data=`` or ``masker=`` for the background (the second argument, whatever its name);
* ``seed=`` (the default key of every call) and ``output_names=`` (the outputs' names);
* ``feature_perturbation=None``: the default;
* on calls, ``max_evals=`` (shap's evaluation budget; see :func:`budget_changes`) and
  ``silent=``; on ``shap_values``, also ``nsamples=`` and ``l1_reg=``.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import pickle
import warnings
from typing import Any

import jax
import numpy as np

from .._core._inputs import as_key, is_traced
from .._core._model import is_host_model, local_x64
from .._result._explanation import Explanation
from ..maskers._independent import shap_sample_rows
from ..maskers._kmeans import is_summary

SHAP_BACKGROUND_ROWS = 100
"""Background rows shap's Exact, Permutation, Partition, Tree and interventional Linear
explainers keep of an array or DataFrame (``shap.maskers.Independent(data, max_samples=100)``)."""

KERNEL_WARN_ROWS = 100
"""KernelExplainer keeps every background row, as shap's does, and warns above this many (as shap)."""

BACKGROUND_ALIASES = ("data", "masker", "background")
"""shap's names for an explainer's second argument, the background or masker."""


def unpickle_explainer(file: Any, cls: type, what: str) -> Any:
    """Unpickle an explainer from a path or an open binary file, checking it is a ``cls``."""
    if hasattr(file, "read"):
        obj = pickle.load(file)
    else:
        with open(file, "rb") as handle:
            obj = pickle.load(handle)
    if not isinstance(obj, cls):
        raise TypeError(f"`file` holds a {type(obj).__name__}, not a {what}.")
    return obj


def _rebuild_in_x64(payload: bytes) -> Any:
    """An explainer pickled by :meth:`ShapAPI.__reduce_ex__` in float64, unpickled with JAX's x64
    mode on (so its float64 arrays come back float64, not cut to float32)."""
    with local_x64():
        make, args, state = pickle.loads(payload)
        obj = make(*args)
        if state is not None and hasattr(obj, "__setstate__"):
            obj.__setstate__(state)
        elif state is not None:
            obj.__dict__.update(state)
    return obj


def _is_one_row(X: Any) -> bool:
    """True for a single row given as a 1-D array, list or pandas Series."""
    if hasattr(X, "columns"):  # a DataFrame, even of one row, keeps its row axis
        return False
    return np.ndim(X) == 1 if not hasattr(X, "ndim") else X.ndim == 1


def is_rows(data: Any) -> bool:
    """A 2-D array, DataFrame or ``scipy.sparse`` matrix of background rows (not a masker, a
    ``(mean, cov)`` pair, a dict or a weighted summary)."""
    if hasattr(data, "coalition_values") or isinstance(data, (tuple, dict, list)):
        return False
    return hasattr(data, "shape") and len(getattr(data, "shape", ())) == 2 and hasattr(data, "__getitem__")


def shap_background(data: Any, who: str) -> Any:
    """The background rows shap's explainer of this name uses: an array or DataFrame of more
    than :data:`SHAP_BACKGROUND_ROWS` rows becomes shap's sample of 100 rows
    (``shap.utils.sample(data, 100)``, the same rows), silently as shap (an INFO record on the
    ``"jaxshap"`` logger says how to keep every row); anything else is returned as it is.
    """
    if is_summary(data):
        raise ValueError(
            f"{who} averages over background rows with equal weights and takes no weighted summary "
            "(jaxshap.kmeans, shap.kmeans); pass rows (jaxshap.sample(X, 100)), or explain the model's "
            "prediction function with jaxshap.ExactExplainer or KernelExplainer, which take the weights."
        )
    if not is_rows(data) or data.shape[0] <= SHAP_BACKGROUND_ROWS:
        return data
    n = int(data.shape[0])
    pick = shap_sample_rows(n, SHAP_BACKGROUND_ROWS)
    logging.getLogger("jaxshap").info(
        "%s: the background has %d rows; keeping shap's sample of %d (as shap's explainer of this name does). "
        "Pass jaxshap.maskers.Independent(data, max_samples=None) to keep all %d rows (the cost grows with them).",
        who, n, SHAP_BACKGROUND_ROWS, n,
    )
    return data.iloc[pick] if hasattr(data, "iloc") else data[pick]


def linear_background(data: Any, feature_perturbation: str) -> Any:
    """What shap's ``LinearExplainer(model, data)`` estimates its moments from: interventional,
    shap's 100 rows of an array or DataFrame (its ``maskers.Independent(data)``), every row for
    the correlation-dependent values (its ``maskers.Impute(data)``); a masker's rows
    (``maskers.Independent``, ``maskers.Partition``: interventional, as shap), or the weighted
    mean of a weighted one.

    Raises:
      ValueError: for ``feature_perturbation="correlation_dependent"`` with an independent
        masker, or a masker without background rows.
    """
    if not hasattr(data, "coalition_values"):
        return shap_background(data, "LinearExplainer") if feature_perturbation == "interventional" else data
    rows = getattr(data, "data", None)
    if rows is None or not hasattr(data, "mean"):
        raise ValueError(
            f"LinearExplainer takes background rows, a (mean, cov) pair or a maskers.Independent masker; got "
            f"{type(data).__name__}."
        )
    if feature_perturbation != "interventional":
        raise ValueError(
            f"a {type(data).__name__} masker masks features independently (interventional); pass the rows "
            "themselves for feature_perturbation='correlation_dependent'."
        )
    return rows if getattr(data, "weights", None) is None else (data.mean, None)


def warn_large_background(n_rows: int, who: str) -> None:
    """shap's KernelExplainer advice, as a warning: every background row costs one model
    evaluation per coalition."""
    if n_rows > KERNEL_WARN_ROWS:
        warnings.warn(
            f"{who}: using all {n_rows} background rows (as shap does) could cause slower run times; "
            "summarise them with shap.sample(data, K), shap.kmeans(data, K) or "
            "jaxshap.maskers.Independent(data, max_samples=K).",
            UserWarning,
            stacklevel=4,
        )


def _shap_keywords(init: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, dict]:
    """shap's keyword spellings of one ``__init__``'s arguments: ``(args, kwargs, extras)``.

    ``data=``/``masker=`` name the second parameter; ``seed`` and ``output_names`` (when the
    ``__init__`` does not take them) are taken out into ``extras``; ``feature_perturbation=None``
    becomes the parameter's default.
    """
    params = inspect.signature(init).parameters
    names = list(params)
    second = names[2] if len(names) > 2 and params[names[2]].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else None
    kwargs = dict(kwargs)
    for alias in BACKGROUND_ALIASES:
        if alias in kwargs and alias not in params and second is not None:
            if second in kwargs or len(args) >= 2:
                raise TypeError(f"got both `{alias}` and `{second}` (the same argument, the background); pass one.")
            kwargs[second] = kwargs.pop(alias)
    extras = {k: kwargs.pop(k) for k in ("seed", "output_names") if k in kwargs and k not in params}
    if "feature_perturbation" in params and kwargs.get("feature_perturbation", "") is None:
        kwargs["feature_perturbation"] = params["feature_perturbation"].default
    return args, kwargs, extras


def float64_rows(data: Any) -> bool:
    """Rows that hold float64 (or integer) numbers: a DataFrame (read as float64), a float64
    or integer array, or a weighted summary or masker holding such rows (``shap.kmeans``,
    ``maskers.Independent``: a masker built in float64 keeps its rows in float64)."""
    if is_summary(data) or (hasattr(data, "coalition_values") and hasattr(data, "weights") and hasattr(data, "data")):
        data = data.data
    if not is_rows(data) or hasattr(data, "nnz"):
        return False
    if hasattr(data, "columns"):
        return True
    dtype = np.dtype(getattr(data, "dtype", np.float32))
    return dtype == np.float64 or dtype.kind in "iub"


def host_model_float64(model: Any, data: Any) -> bool:
    """Whether ``model`` is a host (NumPy) model given float64 rows ``data`` while JAX's x64 mode
    is off: such a model gets its rows in float64, as shap gives them (with x64 on, float64 is
    the default anyway)."""
    if jax.config.jax_enable_x64 or not float64_rows(data):
        return False
    return is_host_model(model, int(np.shape(getattr(data, "data", data))[1]))


def host_float64(cls: type, arguments: dict) -> bool:
    """Whether a model-agnostic explainer (``keeps_host_dtype``) computes in float64: its model
    and background rows pass :func:`host_model_float64`."""
    if not getattr(cls, "keeps_host_dtype", False):
        return False
    values = list(arguments.values())
    return len(values) >= 2 and host_model_float64(values[0], values[1])


def precision(explainer: Any) -> Any:
    """The context an explainer computes in: ``jax.enable_x64`` for a host model given float64
    rows (see :func:`host_float64`), else nothing."""
    return local_x64() if getattr(explainer, "x64_", False) else contextlib.nullcontext()


def as_host64(explainer: Any, expl: Any) -> Any:
    """A float64 result of a host model (see :func:`host_float64`) with NumPy arrays: JAX arrays
    of float64 outside JAX's x64 mode would be cut to float32 by the next JAX operation."""
    if not getattr(explainer, "x64_", False):
        return expl
    return host64_arrays(expl)


def host64_arrays(tree: Any) -> Any:
    """``tree`` with its concrete JAX arrays as NumPy arrays, which keep float64 outside JAX's
    x64 mode (a JAX array of float64 would be cut to float32 by the next JAX operation)."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a) if isinstance(a, jax.Array) and not is_traced(a) else a, tree)


class ShapConstruction(type):
    """How an explainer is built from a call written as in shap: the one place that translates it.

    ``cls(*args, **kwargs)`` runs :meth:`__call__`, which takes shap's spellings out of the
    arguments (:func:`_shap_keywords`), records them (``init_args_``, so that a call with
    another budget can rebuild the explainer: :func:`rebuilt`), decides the precision once
    (``x64_``: float64 for a host model given float64 rows, :func:`host_float64`), runs the
    class's own ``__init__`` in it, and sets the default key (``seed=``) and the outputs' names
    (``output_names=``). The classes' ``__init__`` methods take jaxshap's own arguments only.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, extras = _shap_keywords(cls.__init__, args, kwargs)
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        init_args = dict(list(bound.arguments.items())[1:])
        x64 = host_float64(cls, init_args)
        with local_x64() if x64 else contextlib.nullcontext():
            self = super().__call__(*args, **kwargs)
        self.__dict__.update(init_args_=init_args, seed_=_check_seed(extras.get("seed")))
        self.__dict__.setdefault("x64_", x64)  # a class may decide float64 itself (TreeExplainer)
        if extras.get("output_names") is not None:
            _set_output_names(self, extras["output_names"])
        return self


def _check_seed(seed: Any) -> Any:
    if seed is not None:
        as_key(seed)  # the same rule as an int `key`, named
    return seed


def _set_output_names(explainer: Any, names: Any) -> None:
    """shap's ``output_names=``: the names of the model's outputs on every Explanation."""
    names = tuple(str(n) for n in ([names] if isinstance(names, str) else names))
    k = getattr(getattr(explainer, "model", None), "n_outputs", None) or getattr(explainer, "n_outputs", None)
    if k is not None and k > 1 and len(names) != k:
        raise ValueError(f"`output_names` has {len(names)} names but the model has {k} outputs.")
    if k is None or k > 1:
        if hasattr(getattr(explainer, "model", None), "output_names"):
            explainer.model.output_names = names
        else:
            explainer._output_names = names


def budget_changes(explainer: Any, max_evals: Any) -> dict:
    """The constructor changes that give ``explainer`` shap's ``max_evals`` budget per row.

    * a permutation explainer (``shap_budget = "permutations"``): shap walks ``max_evals //
      (2 M + 1)`` permutations forward and back, so ``n_permutations = 2 * (max_evals //
      (2 M + 1))`` walks (at least 4, jaxshap's least);
    * an exact explainer (``shap_budget = "enumerate"``): nothing changes; shap's rule
      ``max_evals >= 2**M`` is checked (exact Owen values need fewer and are not checked);
    * ``shap_budget = "exact"`` (``CoalitionExplainer``, whose shap counterpart ignores the
      budget): nothing changes and nothing is checked;
    * ``"auto"`` or ``None``: nothing changes.

    Raises:
      ValueError: for a budget too small for shap's rule, as shap.
      TypeError: for an explainer that has no ``max_evals`` in shap.
    """
    if max_evals is None or max_evals == "auto":
        return {}
    kind = getattr(type(explainer), "shap_budget", None)
    name = type(explainer).__name__
    if kind is None:
        raise TypeError(f"{name} takes no `max_evals` (shap's budget of the Exact, Permutation and Partition explainers).")
    m = int(explainer.n_features)
    if isinstance(max_evals, bool) or not isinstance(max_evals, (int, np.integer)) or max_evals < 1:
        raise ValueError(f"`max_evals` must be a positive integer or 'auto'; got {max_evals!r}.")
    if kind == "permutations":
        walks = 2 * (int(max_evals) // (2 * m + 1))
        if walks == 0:
            raise ValueError(
                f"max_evals={max_evals} is too low for the Permutation explainer, it must be at least "
                f"2 * num_features + 1 = {2 * m + 1}!"
            )
        return {"n_permutations": max(walks, 4)}
    if kind == "enumerate" and type(getattr(explainer, "masker", None)).__name__ != "Partition" and max_evals < 2**m:
        raise ValueError(
            f"It takes {2**m} masked evaluations to run the Exact explainer on this instance, but max_evals={max_evals}!"
        )
    return {}


def rebuilt(explainer: Any, changes: dict) -> Any:
    """The explainer built again from its recorded arguments with ``changes`` (cached per change)."""
    if not changes:
        return explainer
    args = getattr(explainer, "init_args_", None)
    if args is None:
        raise TypeError(f"{type(explainer).__name__} cannot be rebuilt with {sorted(changes)}.")
    cache = explainer.__dict__.setdefault("rebuilt_", {})
    key = tuple(sorted(changes.items()))
    if key not in cache:
        with warnings.catch_warnings():  # the background warning was given when it was built
            warnings.simplefilter("ignore")
            new = type(explainer)(**{**args, **changes})
        for name in ("seed_", "chosen_by_auto"):
            if name in explainer.__dict__:
                new.__dict__[name] = explainer.__dict__[name]
        cache[key] = new
    return cache[key]


def shap_call_options(explainer: Any, key: Any, kwargs: dict) -> tuple[Any, Any, dict]:
    """``(explainer, key, kwargs)`` for a call written as in shap: ``max_evals=`` picks the
    explainer with that budget, ``silent=True`` turns the progress bar off, and ``seed=`` given
    at construction is the default key."""
    kwargs = dict(kwargs)
    changes = budget_changes(explainer, kwargs.pop("max_evals", None))
    silent = kwargs.pop("silent", None)
    if silent:
        kwargs.setdefault("progress", False)
    if key is None and getattr(explainer, "seed_", None) is not None:
        key = explainer.seed_
    return rebuilt(explainer, changes), key, kwargs


def _kernel_budget(explainer: Any, nsamples: Any, l1_reg: Any) -> Any:
    """shap's ``shap_values(X, nsamples=..., l1_reg=...)`` on a KernelExplainer."""
    if l1_reg not in ("auto", False, 0, None):
        raise ValueError(
            f"l1_reg={l1_reg!r}: jaxshap's KernelExplainer solves the full constrained regression, with no L1 "
            "feature selection; pass l1_reg=False ('auto' and None mean the same here). shap's default "
            "l1_reg='num_features(10)' (since shap 0.47) keeps the first 10 features of a LARS path whenever more "
            "than 10 features vary, whatever the budget (even when every coalition is enumerated), and gives the "
            "others 0; shap's shap_values(X, l1_reg=False) computes what jaxshap does."
        )
    if nsamples is None or nsamples == "auto":
        return explainer
    if "n_coalitions" not in inspect.signature(type(explainer).__init__).parameters:
        raise TypeError(f"{type(explainer).__name__}.shap_values takes no `nsamples` (KernelExplainer's budget).")
    return rebuilt(explainer, {"n_coalitions": nsamples})


def interactions_as_values(expl: Explanation) -> Explanation:
    """shap's ``explainer(X, interactions=True)``: an Explanation whose ``values`` are the
    interaction values ``[n, M, M]`` (``[n, M, M, K]``), also kept as ``interaction_values``;
    rows of the matrices sum to the SHAP values for the indices that split them (k-SII, STII, FSII)."""
    inter = expl.interaction_values
    return Explanation(inter, expl.base_values, expl.data, None, expl.feature_names, expl.output_names, inter)


class ShapAPI(metaclass=ShapConstruction):
    """``shap_values(X)``, ``save(file)`` and ``load(file)`` as in shap's explainers, and shap's
    spellings of the constructors' arguments (:class:`ShapConstruction`; see the module docstring).

    Each explainer's ``expected_value`` reads as NumPy outside traced code, as shap's: a NumPy
    scalar for one output, ``[K]`` for ``K`` (a tracer inside ``jit``/``grad``), so
    ``shap.force_plot(explainer.expected_value, ...)`` and ``shap.decision_plot`` take it.
    """

    def __call__(self, X: Any, key: Any = None, **kwargs: Any) -> Any:
        """Explain ``X`` (see the explainer's own ``__call__``), with shap's ``max_evals=`` and
        ``silent=`` (see :func:`shap_call_options`)."""
        explainer, key, kwargs = shap_call_options(self, key, kwargs)
        if explainer is not self:
            return explainer(X, key, **kwargs)
        with precision(self):
            return as_host64(self, super().__call__(X, key, **kwargs))

    def explain_batches(self, *args: Any, **kwargs: Any) -> Any:
        """The explainer's :meth:`explain_batches`, each batch computed in its precision."""
        batches = super().explain_batches(*args, **kwargs)
        while True:
            with precision(self):
                try:
                    out = as_host64(self, next(batches))
                except StopIteration:
                    return
            yield out

    def __repr__(self) -> str:
        chosen = getattr(self, "chosen_by_auto", None)
        note = f", chosen by jaxshap.Explainer: {chosen}" if chosen else ""
        return f"{type(self).__name__}(features={getattr(self, 'n_features', '?')}{note})"

    def shap_values(self, X: Any, key: Any = None, *, nsamples: Any = None, l1_reg: Any = "auto", **kwargs: Any) -> np.ndarray:
        """SHAP values as a NumPy array with shap's shapes.

        Equivalent to ``np.asarray(explainer(X, key=key, **kwargs).values)``: ``[n, M]`` for a
        single-output model and ``[n, M, K]`` for ``K`` outputs (shap's layout since 0.45: the
        output axis last); one row given as a 1-D array or a pandas Series gives ``[M]`` (or
        ``[M, K]``). The base value is :attr:`expected_value`.

        Args:
          X: rows to explain (array, DataFrame, ``scipy.sparse`` matrix, or one row).
          key: PRNG key for the sampling explainers (``None``: ``jax.random.key(0)``, or the
            constructor's ``seed=``).
          nsamples: KernelExplainer's budget for this call, as shap's (``"auto"`` or ``None``:
            the explainer's own ``n_coalitions``).
          l1_reg: shap's L1 feature selection: only ``False`` (``"auto"``, ``None``) is accepted,
            and no selection is made (the regression is solved in full, as shap's
            ``l1_reg=False``; shap's default ``"num_features(10)"`` keeps 10 features when more vary).
          **kwargs: passed on to the explainer's call (``progress=``, ``silent=``, ``max_evals=``).
        """
        explainer = _kernel_budget(self, nsamples, l1_reg)
        expl = explainer(X, key=key, **kwargs) if key is not None else explainer(X, **kwargs)
        values = np.asarray(expl.values)
        return values[0] if _is_one_row(X) and values.shape[0] == 1 else values

    def __reduce_ex__(self, protocol: int) -> Any:
        """Pickle as usual; an explainer that computes in float64 (``x64_``) is rebuilt with JAX's
        x64 mode on, so a loaded copy computes exactly as the original."""
        reduced = super().__reduce_ex__(protocol)
        if not getattr(self, "x64_", False) or not isinstance(reduced, tuple):
            return reduced
        return _rebuild_in_x64, (pickle.dumps(tuple(reduced[:3]), protocol),)

    def save(self, file: Any) -> None:
        """Save the explainer with :mod:`pickle` (``file``: a path or a binary file object).

        The model must be picklable (a scikit-learn or XGBoost model's method, a module-level
        function; a ``lambda`` needs ``cloudpickle``); compiled programs are rebuilt on load.
        """
        if hasattr(file, "write"):
            pickle.dump(self, file)
        else:
            with open(file, "wb") as handle:
                pickle.dump(self, handle)

    @classmethod
    def load(cls, file: Any) -> Any:
        """Load an explainer saved with :meth:`save` (only load files you trust: this unpickles).

        Raises:
          TypeError: when the file holds something other than an explainer of this class.
        """
        return unpickle_explainer(file, cls, cls.__name__)
