"""``TreeExplainer``: exact TreeSHAP for tree ensembles (build, outputs and explain in their own modules)."""

from ._explainer import TreeExplainer

__all__ = ["TreeExplainer"]
