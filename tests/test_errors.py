"""Bad input gets a clear error naming the argument."""

import numpy as np
import pytest

import jaxshap

model = lambda Z: Z.sum(-1)
background = np.zeros((4, 3), np.float32)
X = np.ones((2, 3), np.float32)


@pytest.mark.parametrize("cls", [jaxshap.ExactExplainer, jaxshap.PermutationExplainer])
def test_wrong_feature_count(cls):
    ex = cls(model, background)
    with pytest.raises(ValueError, match=r"`X` has 4 features but the background has 3"):
        ex(np.ones((2, 4), np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_X(bad):
    """NaN in X goes to the model (as in shap); a model that cannot handle it gives NaN outputs,
    reported, before the explainer runs, with the rows and the first bad entry of X."""
    Z = X.copy()
    Z[1, 2] = bad
    with pytest.raises(ValueError, match=r"`X` holds NaN or inf in 1 row\(s\) \(rows 1; first at index \(1, 2\)\)"):
        jaxshap.ExactExplainer(model, background)(Z)


def test_non_finite_background():
    bg = background.copy()
    bg[0, 0] = np.nan
    with pytest.raises(ValueError, match="`background` contains NaN or inf"):
        jaxshap.ExactExplainer(model, bg)


def test_empty_background():
    with pytest.raises(ValueError, match="`background` is empty"):
        jaxshap.PermutationExplainer(model, np.zeros((0, 3)))


def test_missing_background():
    with pytest.raises(ValueError, match="`background` is required"):
        jaxshap.ExactExplainer(model, None)


def test_too_many_features_for_exact():
    with pytest.raises(ValueError, match="KernelExplainer.*PermutationExplainer"):
        jaxshap.ExactExplainer(model, np.zeros((2, 21), np.float32))


@pytest.mark.parametrize("n", [0, 3, 2, -4, 4.0, True, "8"])
def test_bad_n_permutations(n):
    with pytest.raises(ValueError, match="`n_permutations` must be an even integer of at least 4"):
        jaxshap.PermutationExplainer(model, background, n_permutations=n)


def test_bad_shapes():
    with pytest.raises(ValueError, match="`X` must be a 2-D array"):
        jaxshap.ExactExplainer(model, background)(np.ones((2, 3, 1)))
    with pytest.raises(TypeError, match="`X` must hold numbers"):
        jaxshap.ExactExplainer(model, background)(np.array([["a", "b", "c"]]))


def test_model_output_shape_is_checked():
    with pytest.raises(ValueError, match=r"`model` must map an \[n, M\] array to shape \[n\] or \[n, K\]"):
        jaxshap.ExactExplainer(lambda Z: Z.sum(), background)
    with pytest.raises(ValueError, match=r"`model` must map"):
        jaxshap.ExactExplainer(lambda Z: np.asarray(Z)[:, :, None, None], background)


def test_model_that_cannot_run():
    def broken(Z):
        raise RuntimeError("boom")

    with pytest.raises(TypeError, match="`model` could not be evaluated.*raised RuntimeError: boom"):
        jaxshap.ExactExplainer(broken, background)
    with pytest.raises(TypeError, match="`model` must be callable"):
        jaxshap.ExactExplainer("not a model", background)


def test_bad_memory_budget():
    with pytest.raises(ValueError, match="`memory_budget` must be a positive number of bytes"):
        jaxshap.ExactExplainer(model, background, memory_budget=0)


def test_feature_names_length():
    with pytest.raises(ValueError, match="`feature_names` has 2 names but the data has 3 features"):
        jaxshap.ExactExplainer(model, background, feature_names=["a", "b"])(X)
