"""The explainers: model-agnostic (exact, permutation, kernel), linear, gradient, amortized and tree (``_tree/``), and ``Explainer`` (``_auto.py``), which picks one."""
