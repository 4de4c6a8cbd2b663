"""Local stand-ins for the data sets shap's notebooks download, and the two comparisons.

shap's notebooks call ``shap.datasets.adult()``, ``california()`` and ``nhanesi()``, which
download files; the conformance suite builds data of the same shape, column names and dtypes
here instead (seeded, small), so it runs offline. ``diabetes()`` and ``iris()`` ship with
scikit-learn and are used as shap loads them.

Comparisons (issue 28):

* :func:`assert_exact` -- exact methods agree within ``1e-5`` relative to the values' scale;
* :func:`assert_no_worse` -- a sampling method's error against the exact values is no larger
  than shap's at the same budget; :func:`assert_no_worse_over_seeds` averages it over a few
  seeds of both libraries (one draw of a dozen values is too noisy to rank two estimators).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ADULT_COLUMNS = [
    ("Age", "float32"), ("Workclass", "int8"), ("Education-Num", "float32"), ("Marital Status", "int8"),
    ("Occupation", "int8"), ("Relationship", "int64"), ("Race", "int8"), ("Sex", "int8"),
    ("Capital Gain", "float32"), ("Capital Loss", "float32"), ("Hours per week", "float32"), ("Country", "int8"),
]
CALIFORNIA_COLUMNS = ["MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude", "Longitude"]


def adult(n_points: int = 400, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """``shap.datasets.adult()``'s shape: 12 columns (float32 numbers, integer category codes), a
    boolean target."""
    rng = np.random.default_rng(seed)
    n = n_points
    cols = {
        "Age": rng.uniform(17, 90, n).round(),
        "Workclass": rng.integers(0, 9, n),
        "Education-Num": rng.integers(1, 17, n),
        "Marital Status": rng.integers(0, 7, n),
        "Occupation": rng.integers(0, 15, n),
        "Relationship": rng.integers(0, 6, n),
        "Race": rng.integers(0, 5, n),
        "Sex": rng.integers(0, 2, n),
        "Capital Gain": np.where(rng.random(n) < 0.1, rng.uniform(1000, 20000, n).round(), 0.0),
        "Capital Loss": np.where(rng.random(n) < 0.05, rng.uniform(1000, 3000, n).round(), 0.0),
        "Hours per week": rng.uniform(10, 70, n).round(),
        "Country": rng.integers(0, 42, n),
    }
    X = pd.DataFrame({name: np.asarray(cols[name]).astype(dtype) for name, dtype in ADULT_COLUMNS})
    score = (
        0.05 * (X["Age"] - 40) + 0.3 * (X["Education-Num"] - 10) + 0.8 * X["Sex"]
        + 2e-4 * X["Capital Gain"] + 0.04 * (X["Hours per week"] - 40) - 0.2 * X["Relationship"]
    )
    y = (score + rng.logistic(size=n) > 0.0).to_numpy()
    return X, y


def california(n_points: int = 400, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """``shap.datasets.california()``'s shape: 8 float64 columns, a float64 target."""
    rng = np.random.default_rng(seed)
    n = n_points
    X = pd.DataFrame(
        {
            "MedInc": rng.gamma(4.0, 1.0, n),
            "HouseAge": rng.uniform(1, 52, n).round(),
            "AveRooms": rng.normal(5.4, 1.2, n),
            "AveBedrms": rng.normal(1.1, 0.1, n),
            "Population": rng.gamma(2.0, 700.0, n).round(),
            "AveOccup": rng.normal(3.0, 0.7, n),
            "Latitude": rng.uniform(32.5, 42.0, n),
            "Longitude": rng.uniform(-124.3, -114.3, n),
        }
    )
    y = (
        0.4 * X["MedInc"] + 0.01 * X["HouseAge"] - 0.1 * X["AveOccup"] - 0.3 * (X["Latitude"] - 35)
        - 0.3 * (X["Longitude"] + 119) + 0.1 * X["MedInc"] * (X["Latitude"] > 37) + rng.normal(0, 0.3, n)
    ).to_numpy()
    return X, y


def nhanesi(n_points: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """``shap.datasets.nhanesi()``'s shape for the survival notebook: named float columns and
    signed survival times (negative: censored), as XGBoost's ``survival:cox`` reads them."""
    rng = np.random.default_rng(seed)
    n = n_points
    X = pd.DataFrame(
        {
            "age": rng.uniform(25, 75, n),
            "sex_isFemale": rng.integers(0, 2, n).astype(float),
            "systolic_blood_pressure": rng.normal(135, 20, n),
            "white_blood_cells": rng.normal(7, 2, n),
            "bmi": rng.normal(26, 4, n),
            "sedimentation_rate": rng.gamma(2, 8, n),
            "serum_protein": rng.normal(7, 0.5, n),
            "pulse_pressure": rng.normal(50, 12, n),
        }
    )
    hazard = np.exp(0.06 * (X["age"] - 50) - 0.4 * X["sex_isFemale"] + 0.01 * (X["systolic_blood_pressure"] - 135))
    time = rng.exponential(20 / hazard.to_numpy())
    censored = time > 20
    return X, np.where(censored, -20.0, time)


def _scale(values: np.ndarray) -> float:
    return float(np.max(np.abs(values))) or 1.0


def assert_exact(got, want, rtol: float = 1e-5, what: str = "values", scale: float | None = None) -> None:
    """``got`` equals ``want`` within ``rtol`` relative to ``scale`` (by default the largest
    ``|want|``; pass the values' scale for base values near zero). A one-element array and a
    scalar compare equal (shap's TreeExplainer gives ``expected_value`` as ``[1]`` for some
    models, jaxshap a scalar)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if want.shape == (1,) and got.shape == ():
        want = want[0]
    assert got.shape == want.shape, f"{what}: shape {got.shape} != shap's {want.shape}"
    scale = _scale(want) if scale is None else max(float(scale), _scale(want))
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= rtol * scale, f"{what}: max |jaxshap - shap| = {err:.3g} > {rtol:g} x {scale:.3g}"


def assert_no_worse(got, shap_estimate, exact, what: str = "values", factor: float = 1.0) -> None:
    """A sampling method: jaxshap's squared error against the exact values is no larger than
    ``factor`` times shap's at the same budget. Errors whose root mean square is below ``1e-7``
    of the values' scale count as zero (both are then exact up to rounding: shap's permutations
    are exact for an additive model)."""
    got, ref, exact = (np.asarray(a, np.float64) for a in (got, shap_estimate, exact))
    assert got.shape == ref.shape == exact.shape, f"{what}: shapes {got.shape}, {ref.shape}, {exact.shape}"
    floor = exact.size * (1e-7 * _scale(exact)) ** 2
    ours, theirs = float(np.sum((got - exact) ** 2)), float(np.sum((ref - exact) ** 2))
    assert ours <= max(factor * theirs, floor), f"{what}: jaxshap's squared error {ours:.4g} > {factor} x shap's {theirs:.4g}"


SEEDS = (0, 1, 2, 3)


def assert_no_worse_over_seeds(example, exact, what: str = "values", factor: float = 1.0) -> None:
    """``example(lib, seed)`` returns a sampling method's values; run with ``shap`` and with
    ``jaxshap`` for each of :data:`SEEDS` (NumPy's global seed set too, for shap's
    KernelExplainer) and compare the squared errors summed over the seeds (``factor`` as in
    :func:`assert_no_worse`)."""
    import shap

    import jaxshap

    got, want = [], []
    for seed in SEEDS:
        np.random.seed(seed)
        want.append(np.asarray(example(shap, seed), np.float64))
        np.random.seed(seed)
        got.append(np.asarray(example(jaxshap, seed), np.float64))
    exact = np.asarray(exact, np.float64)
    assert_no_worse(np.stack(got), np.stack(want), np.stack([exact] * len(SEEDS)), what, factor)
