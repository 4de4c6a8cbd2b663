"""``jaxshap.Explainer(model, masker_or_data)``: pick the algorithm as ``shap.Explainer`` does; and
the explainer built on its first call (:class:`DeferredExplainer`), for shap's function maskers,
which learn ``M`` from the rows.
"""

from __future__ import annotations

import abc
import dataclasses
import warnings
from typing import Any, Callable, Sequence

from .._engine._explainer import resolve_link
from .._engine._shap_api import is_rows, unpickle_explainer
from .._tree._reader import reader_for
from ..maskers import Independent
from ..maskers._base import FunctionMasker, is_function_masker
from ..maskers._causal import player_masker
from ..maskers._kmeans import is_summary
from ._exact import MAX_EXACT_FEATURES, CoalitionExplainer, ExactExplainer
from ._kernel import KernelExplainer
from ._linear import LinearExplainer
from ._permutation import PermutationExplainer
from ._tree import TreeExplainer


PLAYER_ARGS = ("groups", "causal_ordering", "confounding", "asymmetric")
"""The model-agnostic explainers' arguments that change the game's players or values (shapr's)."""


@dataclasses.dataclass(frozen=True)
class Choice:
    """What :class:`Explainer` knows of the call when it picks: the user's ``model``, the
    ``masker`` (background rows already wrapped in ``maskers.Independent``, or ``None``), the
    user's own ``rows`` (before that wrapping), ``link``, ``feature_names`` and the remaining
    ``kwargs`` (``players`` holds those of :data:`PLAYER_ARGS`)."""

    model: Any
    masker: Any
    rows: Any
    link: str
    feature_names: Any
    kwargs: dict

    @property
    def players(self) -> dict:
        return {k: self.kwargs[k] for k in PLAYER_ARGS if k in self.kwargs}

    @property
    def names(self) -> dict:
        return {"feature_names": self.feature_names} if self.feature_names is not None else {}


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One entry of :class:`Explainer`'s registry.

    Attributes:
      name: the ``algorithm=`` that asks for it.
      build: ``build(choice) -> explainer``.
      picks: ``picks(choice) -> reason or None``: whether ``algorithm="auto"`` takes it, and why
        (the first registered entry that gives a reason wins); ``None``: only on request.
    """

    name: str
    build: Callable[[Choice], Any]
    picks: Callable[[Choice], str | None] | None = None


_REGISTRY: dict[str, Algorithm] = {}


def register_algorithm(name: str, build: Callable[[Choice], Any], picks: Callable[[Choice], str | None] | None = None,
                       *, cls: type | None = None, before: str | None = None) -> None:
    """Add an explainer to :class:`Explainer`'s choices (``algorithm=name``).

    Args:
      name: the ``algorithm=`` value.
      build: ``build(choice: Choice) -> explainer``.
      picks: ``picks(choice) -> reason or None`` for ``algorithm="auto"``; ``None`` for an
        explainer built only on request.
      cls: the explainer class it builds, registered so that ``isinstance(ex, jaxshap.Explainer)``.
      before: the name of a registered entry that ``"auto"`` should ask after this one;
        ``None`` asks it last.
    """
    entry = Algorithm(name, build, picks)
    if cls is not None:
        Explainer.register(cls)
    items = [(k, v) for k, v in _REGISTRY.items() if k != name]
    at = len(items) if before is None else [k for k, _ in items].index(before)
    items.insert(at, (name, entry))
    _REGISTRY.clear()
    _REGISTRY.update(items)


def is_tree_model(model: Any) -> bool:
    """A model a registered tree reader recognises (XGBoost, LightGBM, CatBoost, scikit-learn trees, ...;
    by its type, without calling it): see :class:`jaxshap.trees.TreeReader`."""
    return reader_for(model) is not None


def is_linear_model(model: Any) -> bool:
    """A ``(coef, intercept)`` pair, or a fitted scikit-learn linear model (``coef_``, ``intercept_``)."""
    if isinstance(model, tuple) and len(model) == 2:
        return True
    root = (type(model).__module__ or "").split(".")[0]
    return root == "sklearn" and hasattr(model, "coef_") and hasattr(model, "intercept_")


class Explainer(abc.ABC):
    """Build the explainer ``shap.Explainer`` would pick for this model and background.

    ``jaxshap.Explainer(model, masker_or_data)`` returns an instance of one of the explainers
    (``isinstance(ex, jaxshap.Explainer)`` holds for all of them), chosen as shap chooses:

    1. a fitted XGBoost, LightGBM, CatBoost or scikit-learn tree model -> :class:`TreeExplainer`
       (interventional over the background; path-dependent when no background is given);
    2. a fitted scikit-learn linear model, or a ``(coef, intercept)`` pair ->
       :class:`LinearExplainer` (interventional);
    3. a callable model: :class:`ExactExplainer` up to the masker's ``auto_exact_features``
       (shap's rules: 10 features; with a :class:`maskers.Partition` masker, exact Owen values up
       to 32 features, when the hierarchy needs at most ``2**20`` coalitions), else
       :class:`PermutationExplainer`. :class:`KernelExplainer` is used when asked for with
       ``algorithm="kernel"``.

    The explainer's ``repr`` says which was picked and why (``ex.chosen_by_auto``). The choices
    are a registry: :func:`register_algorithm` adds an explainer (``algorithm=`` its name, and
    optionally a rule for ``"auto"``), so a new explainer is one file plus its registration.

    Args:
      model: a callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy: ``clf.predict_proba``), or
        a fitted tree or linear model.
      masker: background rows (array, DataFrame, sparse matrix: wrapped in
        ``maskers.Independent(data)``, which keeps 100 rows by default as shap does, with a
        warning), a masker (``Independent``, ``Partition``, ``Gaussian``), or shap's function
        masker ``masker(mask, x) -> rows`` (then :class:`PermutationExplainer`, as shap,
        built from the rows of the first call).
      link: ``"identity"`` or ``"logit"`` (model-agnostic explainers only).
      algorithm: ``"auto"`` (default) or a registered name: ``"tree"``, ``"linear"``,
        ``"exact"``, ``"permutation"``, ``"kernel"`` and ``"coalition"`` (:class:`CoalitionExplainer`,
        with its ``partition_tree=``; never picked by ``"auto"``) built in.
      feature_names: optional names of the features.
      **kwargs: passed on to the chosen explainer (for example ``n_permutations=``).

    Raises:
      TypeError: for a model that is neither callable nor a supported tree or linear model.
      ValueError: for an unknown algorithm, or a link the chosen explainer does not have.
    """

    def __new__(
        cls,
        model: Any,
        masker: Any = None,
        *,
        link: Any = "identity",
        algorithm: str = "auto",
        feature_names: Sequence[str] | None = None,
        **kwargs: Any,
    ):
        if algorithm != "auto" and algorithm not in _REGISTRY:
            raise ValueError(f"`algorithm` must be one of {('auto', *_REGISTRY)}; got {algorithm!r}.")
        link = resolve_link(link)
        if is_function_masker(masker) and algorithm in ("auto", "permutation", "exact"):
            # shap's custom masker: shap samples permutations (M is known from the first rows)
            chosen = ExactExplainer if algorithm == "exact" else PermutationExplainer
            names = {"feature_names": feature_names} if feature_names is not None else {}
            return DeferredExplainer(
                lambda X: chosen(model, FunctionMasker(masker, X[:1] if hasattr(X, "iloc") else X), link=link,
                                 **names, **kwargs),
                f"a function masker: {chosen.__name__}",
            )
        rows = masker  # the user's rows: Exact and Permutation sample shap's 100 of them themselves
        if masker is not None and not hasattr(masker, "coalition_values"):
            with warnings.catch_warnings(record=True) as caught:  # re-issued at the caller's line
                warnings.simplefilter("always")
                masker = Independent(masker)  # shap's default: at most 100 rows, with a warning
            for w in caught:
                warnings.warn(w.message, w.category, stacklevel=2)
        choice = Choice(model, masker, rows, link, feature_names, kwargs)
        if algorithm != "auto":
            entry, reason = _REGISTRY[algorithm], f"algorithm={algorithm!r}"
        else:
            entry, reason = next(((e, r) for e in _REGISTRY.values() if e.picks and (r := e.picks(choice))), (None, None))
            if entry is None:
                raise TypeError(f"no registered explainer takes this model ({type(model).__name__}).")
        return _mark(entry.build(choice), reason)

    @classmethod
    def load(cls, file: Any) -> Any:
        """Load any explainer saved with its ``save`` method (this unpickles: trusted files only)."""
        return unpickle_explainer(file, cls, "jaxshap explainer")


def _plain(choice: Choice) -> bool:
    """Background rows (or none) and no players: what Tree and Linear explainers take."""
    return (choice.masker is None or type(choice.masker) is Independent) and not choice.players


def _picks_tree(choice: Choice) -> str | None:
    if not (is_tree_model(choice.model) and _plain(choice)):
        return None
    return "a tree model" + (", interventional over the background" if choice.masker is not None
                             else ", no background: path-dependent")


def _build_tree(choice: Choice) -> Any:
    _identity_only(choice.link, "TreeExplainer")
    data, names, masker = None, choice.names, choice.masker
    if masker is not None:
        if getattr(masker, "weights", None) is not None:
            raise ValueError("TreeExplainer takes unweighted background rows; pass the rows themselves as `masker`.")
        data = masker.data
        if masker.feature_names is not None and choice.feature_names is None:
            names = {"feature_names": list(masker.feature_names)}
    return TreeExplainer(choice.model, data, **names, **choice.kwargs)


def _picks_linear(choice: Choice) -> str | None:
    ok = is_linear_model(choice.model) and _plain(choice) and choice.masker is not None
    return "a linear model" if ok else None


def _build_linear(choice: Choice) -> Any:
    _identity_only(choice.link, "LinearExplainer")
    masker, names = choice.masker, choice.names
    if masker is None or not isinstance(masker, Independent):
        raise ValueError("LinearExplainer needs background rows (or an Independent masker) as `masker`.")
    if masker.feature_names is not None and choice.feature_names is None:
        names = {"feature_names": list(masker.feature_names)}
    return LinearExplainer(choice.model, (masker.mean, None), **names, **choice.kwargs)


def _callable_model(choice: Choice) -> None:
    """Raise unless a model-agnostic explainer can take the model and masker."""
    if choice.masker is None:
        raise ValueError(
            "`masker` is required for this model: pass background rows [B, M] (for example 100 training "
            "rows) or a masker such as jaxshap.maskers.Independent(data)."
        )
    if not callable(choice.model):
        model = choice.model
        hint = " Pass its prediction function, such as model.predict or model.predict_proba." if hasattr(model, "predict") else ""
        raise TypeError(
            f"`model` ({type(model).__name__}) is not callable and is not a tree or linear model jaxshap "
            f"can read.{hint}"
        )


def _model_agnostic(cls: type) -> Callable[[Choice], Any]:
    """``build`` of a model-agnostic explainer: Exact and Permutation read the user's own rows (in
    their precision, keeping shap's 100 of them); Kernel takes the masker (every row)."""

    def build(choice: Choice) -> Any:
        _callable_model(choice)
        readable = is_rows(choice.rows) or is_summary(choice.rows)  # read by the explainer in its precision
        background = choice.rows if cls is not KernelExplainer and readable else choice.masker
        with warnings.catch_warnings():  # the sampling warning was given when the masker was made
            warnings.simplefilter("ignore")
            return cls(choice.model, background, link=choice.link, **choice.names, **choice.kwargs)

    return build


def _exact_or_permutation(choice: Choice) -> tuple[str, str]:
    """``(algorithm, reason)``: exact up to the game's feature limit (shap's rule) and
    ExactExplainer's size, permutation beyond; the game is the masker with its players."""
    masker, players = choice.masker, choice.players
    game = player_masker(masker, **players, column_names=choice.feature_names) if players else masker
    m, limit = game.n_features, game.auto_exact_features
    if m > limit:
        return "permutation", f"{m} features > {limit}"
    if (c := game.exact_coalition_count()) > 2**MAX_EXACT_FEATURES:
        return "permutation", f"{c:,} coalitions for exact {game.attribution} values > 2**{MAX_EXACT_FEATURES}"
    return "exact", f"{m} features <= {limit}: exact {game.attribution} values"


def _picks(algorithm: str) -> Callable[[Choice], str | None]:
    """Exact or Permutation for any other model, as shap (:func:`_exact_or_permutation`)."""

    def picks(choice: Choice) -> str | None:
        _callable_model(choice)
        chosen, reason = _exact_or_permutation(choice)
        return reason if chosen == algorithm else None

    return picks


def _identity_only(link: str, name: str) -> None:
    if link != "identity":
        raise ValueError(
            f"{name} explains the model's raw output and has no `link`; got link={link!r}. Pass a callable "
            "that returns probabilities (clf.predict_proba) to use link='logit' with a model-agnostic explainer."
        )


def _mark(explainer: Any, reason: str) -> Any:
    explainer.chosen_by_auto = reason
    return explainer


register_algorithm("tree", _build_tree, _picks_tree, cls=TreeExplainer)
register_algorithm("linear", _build_linear, _picks_linear, cls=LinearExplainer)
register_algorithm("exact", _model_agnostic(ExactExplainer), _picks("exact"), cls=ExactExplainer)
register_algorithm("permutation", _model_agnostic(PermutationExplainer), _picks("permutation"), cls=PermutationExplainer)
register_algorithm("kernel", _model_agnostic(KernelExplainer), cls=KernelExplainer)
register_algorithm("coalition", _model_agnostic(CoalitionExplainer), cls=CoalitionExplainer)


class DeferredExplainer:
    """Holds ``build(X) -> explainer`` and builds the explainer from the first rows explained.

    shap's custom maskers (a callable ``masker(mask, x)``) do not say how many features there
    are; shap learns it from the rows of the first call, and so does this wrapper. Calls,
    ``shap_values`` and attributes go to the built explainer (``expected_value`` is known once
    rows were explained).
    """

    def __init__(self, build: Callable[[Any], Any], reason: str):
        self._build, self._explainer, self.chosen_by_auto = build, None, reason

    def _get(self, X: Any) -> Any:
        if self._explainer is None:
            self._explainer = self._build(X)
            self._explainer.chosen_by_auto = self.chosen_by_auto
        return self._explainer

    def __call__(self, X: Any, *args: Any, **kwargs: Any) -> Any:
        return self._get(X)(X, *args, **kwargs)

    def shap_values(self, X: Any, *args: Any, **kwargs: Any) -> Any:
        return self._get(X).shap_values(X, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or self.__dict__.get("_explainer") is None:
            raise AttributeError(
                f"{name!r}: this explainer (a function masker) is built from the rows of its first call; "
                "call it on X first."
            )
        return getattr(self._explainer, name)

    def __repr__(self) -> str:
        inner = repr(self._explainer) if self._explainer is not None else "not built yet"
        return f"DeferredExplainer({inner}, chosen by jaxshap.Explainer: {self.chosen_by_auto})"
