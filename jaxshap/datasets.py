"""Small real data sets shipped with the package, so examples run offline."""

from __future__ import annotations

from importlib import resources

import numpy as np


def load_diabetes() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The diabetes data of Efron, Hastie, Johnstone & Tibshirani (2004), "Least angle regression".

    442 patients, 10 baseline variables (age, sex, body-mass index, mean blood pressure and six
    blood serum measurements s1..s6), in their original units, and a quantitative measure of
    disease progression one year after baseline.

    Returns:
      ``(X, y, feature_names)``: ``X`` float64 ``[442, 10]``, ``y`` float64 ``[442]``.
    """
    path = resources.files("jaxshap").joinpath("data", "diabetes.csv")
    with path.open("r") as fh:
        header = fh.readline().strip().split(",")
        table = np.loadtxt(fh, delimiter=",", dtype=np.float64)
    return table[:, :-1], table[:, -1], header[:-1]
