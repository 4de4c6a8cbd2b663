"""The model-agnostic and linear explainers (the tree explainer lives in ``jaxshap._tree``)."""
