"""The data sets shipped with the package: shapes, values read back against their sources, codes."""

import numpy as np
import pytest

import jaxshap


def test_diabetes_first_patient():
    X, y, names = jaxshap.datasets.load_diabetes()
    assert X.shape == (442, 10) and y.shape == (442,) and len(names) == 10
    # Efron et al. (2004), table 1, patient 1 (original units)
    np.testing.assert_allclose(X[0, :4], [59.0, 2.0, 32.1, 101.0])
    assert y[0] == 151.0


def test_airquality_complete_cases():
    X, y, names = jaxshap.datasets.load_airquality()
    assert names == ["Solar.R", "Wind", "Temp", "Month"]
    assert X.shape == (111, 4) and y.shape == (111,) and np.isfinite(X).all() and np.isfinite(y).all()
    # R: airquality[complete.cases(airquality), ][1, ] is May 1st: Ozone 41, Solar.R 190, Wind 7.4, Temp 67
    np.testing.assert_allclose(X[0], [190.0, 7.4, 67.0, 5.0])
    assert y[0] == 41.0
    assert sorted(set(X[:, 3])) == [5.0, 6.0, 7.0, 8.0, 9.0]
    assert np.all(np.diff(X[:, 3]) >= 0)  # date order
    assert np.mean(y) == pytest.approx(42.0991, abs=1e-4)  # R: mean(na.omit(airquality)$Ozone)


def test_penguins_codes_and_frame_agree():
    X, y, names = jaxshap.datasets.load_penguins()
    assert names == ["species", "island", "sex", "bill_length_mm", "bill_depth_mm", "flipper_length_mm"]
    assert X.shape == (333, 6) and y.shape == (333,) and np.isfinite(X).all()
    cats = jaxshap.datasets.PENGUIN_CATEGORIES
    for j, name in enumerate(names[:3]):
        assert set(X[:, j]) == set(range(len(cats[name])))
    # palmerpenguins, first complete bird: Adelie, Torgersen, male, 39.1 / 18.7 / 181 mm, 3750 g
    np.testing.assert_allclose(X[0], [0, 2, 1, 39.1, 18.7, 181.0])
    assert y[0] == 3750.0
    # species counts among complete cases: 146 Adelie, 68 Chinstrap, 119 Gentoo
    assert np.bincount(X[:, 0].astype(int)).tolist() == [146, 68, 119]
    pd = pytest.importorskip("pandas")
    frame, series, names2 = jaxshap.datasets.load_penguins(as_frame=True)
    assert names2 == names and list(frame.columns) == names
    for j, name in enumerate(names):
        col = frame[name]
        if name in cats:
            assert isinstance(col.dtype, pd.CategoricalDtype) and tuple(col.cat.categories) == cats[name]
            np.testing.assert_array_equal(col.cat.codes.to_numpy(), X[:, j])
        else:
            np.testing.assert_array_equal(col.to_numpy(), X[:, j])
    np.testing.assert_array_equal(series.to_numpy(), y)
