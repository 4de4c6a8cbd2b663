"""An explainer built on its first call: shap's function maskers learn ``M`` from the rows."""

from __future__ import annotations

from typing import Any, Callable


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
