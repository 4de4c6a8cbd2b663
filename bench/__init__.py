"""Side-by-side benchmarks of jaxshap against shap; run with ``python -m bench``."""
