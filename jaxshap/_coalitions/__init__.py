"""Coalition machinery: mask enumeration, Shapley weights, permutation and Shapley-kernel sampling."""
