"""``jaxshap.Explainer(model, masker_or_data)``: pick the algorithm as ``shap.Explainer`` does."""

from __future__ import annotations

import abc
import warnings
from typing import Any, Sequence

from .._core._links import resolve_link
from .._engine._shap_api import is_rows, unpickle_explainer
from .._tree._import import reader_for
from ..maskers import Independent
from ..maskers._function import FunctionMasker, is_function_masker
from ..maskers._kmeans import is_summary
from ..maskers._players import player_masker
from ._deferred import DeferredExplainer
from ._exact import MAX_EXACT_FEATURES, ExactExplainer
from ._kernel import KernelExplainer
from ._linear import LinearExplainer
from ._permutation import PermutationExplainer
from ._tree import TreeExplainer

ALGORITHMS = ("auto", "tree", "linear", "exact", "permutation", "kernel")

PLAYER_ARGS = ("groups", "causal_ordering", "confounding", "asymmetric")
"""The model-agnostic explainers' arguments that change the game's players or values (shapr's)."""

def is_tree_model(model: Any) -> bool:
    """A model a registered tree reader recognises (XGBoost, LightGBM, scikit-learn trees, ...;
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

    1. a fitted XGBoost, LightGBM or scikit-learn tree model -> :class:`TreeExplainer`
       (interventional over the background; path-dependent when no background is given);
    2. a fitted scikit-learn linear model, or a ``(coef, intercept)`` pair ->
       :class:`LinearExplainer` (interventional);
    3. a callable model: :class:`ExactExplainer` up to the masker's ``auto_exact_features``
       (shap's rules: 10 features; with a :class:`maskers.Partition` masker, exact Owen values up
       to 32 features, when the hierarchy needs at most ``2**20`` coalitions), else
       :class:`PermutationExplainer`. :class:`KernelExplainer` is used when asked for with
       ``algorithm="kernel"``.

    The explainer's ``repr`` says which was picked and why (``ex.chosen_by_auto``).

    Args:
      model: a callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy: ``clf.predict_proba``), or
        a fitted tree or linear model.
      masker: background rows (array, DataFrame, sparse matrix: wrapped in
        ``maskers.Independent(data)``, which keeps 100 rows by default as shap does, with a
        warning), a masker (``Independent``, ``Partition``, ``Gaussian``), or shap's function
        masker ``masker(mask, x) -> rows`` (then :class:`PermutationExplainer`, as shap,
        built from the rows of the first call).
      link: ``"identity"`` or ``"logit"`` (model-agnostic explainers only).
      algorithm: ``"auto"`` (default) or one of ``"tree"``, ``"linear"``, ``"exact"``,
        ``"permutation"``, ``"kernel"``.
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
        if algorithm not in ALGORITHMS:
            raise ValueError(f"`algorithm` must be one of {ALGORITHMS}; got {algorithm!r}.")
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
        names = {"feature_names": feature_names} if feature_names is not None else {}
        players = {k: kwargs[k] for k in PLAYER_ARGS if k in kwargs}
        plain = (masker is None or type(masker) is Independent) and not players

        if algorithm == "tree" or (algorithm == "auto" and is_tree_model(model) and plain):
            _identity_only(link, "TreeExplainer")
            data = None
            if masker is not None:
                if getattr(masker, "weights", None) is not None:
                    raise ValueError(
                        "TreeExplainer takes unweighted background rows; pass the rows themselves as `masker`."
                    )
                data = masker.data
                if masker.feature_names is not None and feature_names is None:
                    names = {"feature_names": list(masker.feature_names)}
            reason = "a tree model" + (", interventional over the background" if data is not None else ", no background: path-dependent")
            return _mark(TreeExplainer(model, data, **names, **kwargs), reason)
        if algorithm == "linear" or (algorithm == "auto" and is_linear_model(model) and plain and masker is not None):
            _identity_only(link, "LinearExplainer")
            if masker is None or not isinstance(masker, Independent):
                raise ValueError("LinearExplainer needs background rows (or an Independent masker) as `masker`.")
            if masker.feature_names is not None and feature_names is None:
                names = {"feature_names": list(masker.feature_names)}
            return _mark(LinearExplainer(model, (masker.mean, None), **names, **kwargs), "a linear model")
        if masker is None:
            raise ValueError(
                "`masker` is required for this model: pass background rows [B, M] (for example 100 training "
                "rows) or a masker such as jaxshap.maskers.Independent(data)."
            )
        if not callable(model):
            hint = " Pass its prediction function, such as model.predict or model.predict_proba." if hasattr(model, "predict") else ""
            raise TypeError(
                f"`model` ({type(model).__name__}) is not callable and is not a tree or linear model jaxshap "
                f"can read.{hint}"
            )
        if algorithm == "auto":
            algorithm, reason = _exact_or_permutation(masker, players, feature_names)
        else:
            reason = f"algorithm={algorithm!r}"
        chosen = {"exact": ExactExplainer, "permutation": PermutationExplainer, "kernel": KernelExplainer}[algorithm]
        if algorithm != "kernel" and (is_rows(rows) or is_summary(rows)):  # read by the explainer in its precision
            with warnings.catch_warnings():  # the sampling warning was given above
                warnings.simplefilter("ignore")
                return _mark(chosen(model, rows, link=link, **names, **kwargs), reason)
        return _mark(chosen(model, masker, link=link, **names, **kwargs), reason)

    @classmethod
    def load(cls, file: Any) -> Any:
        """Load any explainer saved with its ``save`` method (this unpickles: trusted files only)."""
        return unpickle_explainer(file, cls, "jaxshap explainer")


def _exact_or_permutation(masker: Any, players: dict, feature_names: Any) -> tuple[str, str]:
    """``(algorithm, reason)``: exact up to the game's feature limit (shap's rule) and
    ExactExplainer's size, permutation beyond; the game is the masker with its players."""
    game = player_masker(masker, **players, column_names=feature_names) if players else masker
    m, limit = game.n_features, game.auto_exact_features
    if m > limit:
        return "permutation", f"{m} features > {limit}"
    if (c := game.exact_coalition_count()) > 2**MAX_EXACT_FEATURES:
        return "permutation", f"{c:,} coalitions for exact {game.attribution} values > 2**{MAX_EXACT_FEATURES}"
    return "exact", f"{m} features <= {limit}: exact {game.attribution} values"


def _identity_only(link: str, name: str) -> None:
    if link != "identity":
        raise ValueError(
            f"{name} explains the model's raw output and has no `link`; got link={link!r}. Pass a callable "
            "that returns probabilities (clf.predict_proba) to use link='logit' with a model-agnostic explainer."
        )


def _mark(explainer: Any, reason: str) -> Any:
    explainer.chosen_by_auto = reason
    return explainer


for _cls in (ExactExplainer, PermutationExplainer, KernelExplainer, LinearExplainer, TreeExplainer):
    Explainer.register(_cls)
