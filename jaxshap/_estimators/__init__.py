"""Estimator kernels: pure functions from coalition values to attributions."""
