"""Small real data sets shipped with the package, so examples run offline."""

from __future__ import annotations

import csv
from importlib import resources
from typing import Any

import numpy as np


def load_diabetes() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The diabetes data of Efron, Hastie, Johnstone & Tibshirani (2004), "Least angle regression".

    442 patients, 10 baseline variables (age, sex, body-mass index, mean blood pressure and six
    blood serum measurements s1..s6), in their original units, and a quantitative measure of
    disease progression one year after baseline.

    Returns:
      ``(X, y, feature_names)``: ``X`` float64 ``[442, 10]``, ``y`` float64 ``[442]``.
    """
    header, rows = _read_csv("diabetes.csv")
    table = np.asarray(rows, dtype=np.float64)
    return table[:, :-1], table[:, -1], header[:-1]


def load_airquality() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Daily air quality in New York, May to September 1973 (R's ``datasets::airquality``).

    The data of shapr's introductory vignette: ozone (ppb, Roosevelt Island, 13:00-15:00; the
    target, right-skewed) against solar radiation (``Solar.R``, Langleys, 08:00-12:00, Central
    Park), mean wind speed (``Wind``, mph, LaGuardia), maximum temperature (``Temp``, degrees F,
    LaGuardia) and ``Month`` (5 to 9). The 111 days with no missing value are kept, in date order,
    as in the vignette (``complete.cases``). Source: New York State Department of Conservation
    (ozone) and the National Weather Service (meteorology), via Chambers, Cleveland, Kleiner &
    Tukey (1983), "Graphical Methods for Data Analysis".

    Returns:
      ``(X, y, feature_names)``: ``X`` float64 ``[111, 4]``, ``y`` (ozone) float64 ``[111]``.
    """
    header, rows = _read_csv("airquality.csv")
    table = np.asarray(rows, dtype=np.float64)
    return table[:, :-1], table[:, -1], header[:-1]


PENGUIN_CATEGORIES = {
    "species": ("Adelie", "Chinstrap", "Gentoo"),
    "island": ("Biscoe", "Dream", "Torgersen"),
    "sex": ("female", "male"),
}
"""The categories of :func:`load_penguins`' categorical columns; a column's code is the
category's position here (alphabetical, as R's factors and pandas' categoricals order them)."""


def load_penguins(as_frame: bool = False) -> tuple[Any, Any, list[str]]:
    """Palmer penguins: body mass of 333 adult penguins from three species on three islands.

    Mixed, multimodal data: three categorical features (``species``, ``island``, ``sex``) and
    three numeric ones (``bill_length_mm``, ``bill_depth_mm``, ``flipper_length_mm``) whose
    distributions are mixtures over the species (Gentoo penguins have long flippers and shallow
    bills), so the conditional distribution of one feature given others is far from Gaussian.
    The target is ``body_mass_g``. The 333 birds with no missing value are kept (R package
    ``palmerpenguins``, CC0; Gorman, Williams & Fraser (2014), PLoS ONE 9(3): e90081).

    Args:
      as_frame: return ``X`` as a pandas DataFrame whose categorical columns have pandas'
        ``category`` dtype (categories as in :data:`PENGUIN_CATEGORIES`) and ``y`` as a Series;
        needs pandas. By default ``X`` is a float64 array with the categories' integer codes.

    Returns:
      ``(X, y, feature_names)``: ``X`` ``[333, 6]`` (codes in columns 0-2, or a DataFrame),
      ``y`` (grams) float64 ``[333]`` (or a Series).
    """
    header, rows = _read_csv("penguins.csv")
    names = header[:-1]
    columns = list(zip(*rows))
    X = np.empty((len(rows), len(names)), np.float64)
    for j, name in enumerate(names):
        if name in PENGUIN_CATEGORIES:
            X[:, j] = [PENGUIN_CATEGORIES[name].index(v) for v in columns[j]]
        else:
            X[:, j] = np.asarray(columns[j], np.float64)
    y = np.asarray(columns[-1], np.float64)
    if not as_frame:
        return X, y, names
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("load_penguins(as_frame=True) needs pandas (pip install pandas); "
                          "as_frame=False returns NumPy arrays with category codes.") from None
    frame = pd.DataFrame({
        name: (pd.Categorical.from_codes(X[:, j].astype(int), PENGUIN_CATEGORIES[name])
               if name in PENGUIN_CATEGORIES else X[:, j])
        for j, name in enumerate(names)
    })
    return frame, pd.Series(y, name=header[-1]), names


def _read_csv(name: str) -> tuple[list[str], list[list[str]]]:
    """The header and the rows (as strings) of a CSV file shipped in ``jaxshap/data``."""
    with resources.files("jaxshap").joinpath("data", name).open("r", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        return header, [row for row in reader]
