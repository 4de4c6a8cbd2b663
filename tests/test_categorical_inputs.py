"""pandas ``category`` columns in ``X``: the explainers map their labels to the masker's codes.

A shap/shapr user passes the same mixed DataFrame to the masker (as ``data``) and to the
explainer (as ``X``). The masker's codes come from its training frame's categories; ``X``'s own
pandas codes differ whenever ``X`` holds fewer categories or lists them in another order. The
oracle here is a hand-written label -> code table from the training frame's categories: every
run on the frame must equal the same run on those hand-made codes.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import jaxshap
from jaxshap._core._categorical import encode_categories, frame_categories

CATEGORIES = ["red", "green", "blue"]  # the training frame's order: red = 0, green = 1, blue = 2
CODE = {"red": 0.0, "green": 1.0, "blue": 2.0}


def model(X):
    """A model of the codes: a level per category and an interaction with the numeric column."""
    level = jnp.asarray([0.5, -1.0, 2.0], X.dtype)[X[:, 1].astype(jnp.int32)]
    return X[:, 0] + level * X[:, 2]


@pytest.fixture(scope="module")
def train():
    rng = np.random.default_rng(0)
    n = 240
    colour = rng.choice(CATEGORIES, size=n)
    a = rng.normal(size=n) + (colour == "blue")
    return pd.DataFrame({"a": a, "colour": pd.Categorical(colour, categories=CATEGORIES),
                         "b": rng.normal(size=n) + 0.5 * a})


def explicands(train):
    """Five rows whose frame knows only the categories it holds, in alphabetical order (blue, green):
    its pandas codes differ from the training frame's."""
    rows = train[train["colour"] != "red"].iloc[:5].copy()
    rows["colour"] = pd.Categorical(rows["colour"].astype(str), categories=sorted(set(rows["colour"].astype(str))))
    assert list(rows["colour"].cat.categories) != CATEGORIES[1:]  # another order than the training frame's
    return rows


def by_hand(frame):
    """The rows as the masker's codes, from the hand-written table."""
    out = frame.copy()
    out["colour"] = [CODE[str(v)] for v in frame["colour"]]
    return out.to_numpy(np.float32)


@pytest.fixture(scope="module")
def maskers(train):
    return {
        "Empirical": jaxshap.maskers.Empirical(train),
        "Generative": jaxshap.maskers.Generative(train, key=0, latent=2, hidden=(16,), epochs=3, n_samples=64),
    }


def test_codes_differ_from_the_frames_own(train):
    """The premise: X's own pandas codes are not the masker's."""
    X = explicands(train)
    assert not np.array_equal(np.asarray(X["colour"].cat.codes, float), by_hand(X)[:, 1])


@pytest.mark.parametrize("name", ["Empirical", "Generative"])
@pytest.mark.parametrize("make", [
    lambda m: jaxshap.ExactExplainer(model, m),
    lambda m: jaxshap.PermutationExplainer(model, m, n_permutations=4),
    lambda m: jaxshap.KernelExplainer(model, m, n_coalitions=6),
], ids=["exact", "permutation", "kernel"])
def test_a_mixed_frame_equals_hand_made_codes(train, maskers, name, make):
    masker = maskers[name]
    X = explicands(train)
    ex = make(masker)
    framed = ex(X, key=3)
    coded = ex(by_hand(X), key=3)
    np.testing.assert_array_equal(np.asarray(framed.values), np.asarray(coded.values))
    np.testing.assert_array_equal(np.asarray(framed.data), by_hand(X))  # the model saw the masker's codes
    assert list(framed.feature_names) == ["a", "colour", "b"]


def test_text_columns_and_shuffled_column_order(train, maskers):
    """Labels as plain strings, and columns in another order (matched by name), give the same values."""
    X = explicands(train)
    text = X.assign(colour=X["colour"].astype(str))[["b", "colour", "a"]]
    ex = jaxshap.ExactExplainer(model, maskers["Empirical"])
    np.testing.assert_array_equal(np.asarray(ex(text).values), np.asarray(ex(by_hand(X)).values))


def test_through_the_auto_explainer_groups_and_msev(train, maskers):
    X = explicands(train)
    masker = maskers["Empirical"]
    auto = jaxshap.Explainer(model, masker)
    np.testing.assert_array_equal(np.asarray(auto(X).values), np.asarray(auto(by_hand(X)).values))
    grouped = jaxshap.ExactExplainer(model, masker, groups=[["a", "colour"], ["b"]])
    np.testing.assert_array_equal(np.asarray(grouped(X).values), np.asarray(grouped(by_hand(X)).values))
    framed = jaxshap.msev(masker, X, model, n_coalitions=4, key=1)
    coded = jaxshap.msev(masker, by_hand(X), model, n_coalitions=4, key=1)
    assert framed.msev == coded.msev


def test_an_unseen_category_is_refused_naming_the_column(train, maskers):
    X = explicands(train)
    X = X.assign(colour=X["colour"].astype(str))
    X.iloc[2, X.columns.get_loc("colour")] = "purple"
    with pytest.raises(ValueError, match=r"column 'colour' holds categories the masker never saw: 'purple'"):
        jaxshap.ExactExplainer(model, maskers["Empirical"])(X)


def test_a_category_column_the_masker_does_not_know_is_refused(train):
    """A masker built from codes knows no labels: X's own codes would be a guess."""
    masker = jaxshap.maskers.Empirical(by_hand(train), categorical=[1], feature_names=["a", "colour", "b"])
    with pytest.raises(TypeError, match=r"column 'colour' is a pandas category column, but the masker knows no"):
        jaxshap.ExactExplainer(model, masker)(explicands(train))


def test_numbers_for_numeric_labels_are_ambiguous(train):
    """Labels 10, 20, 30 have codes 0, 1, 2: a numeric column could be either, so it is refused."""
    numeric = train.assign(colour=pd.Categorical(train["colour"].map({"red": 10, "green": 20, "blue": 30}),
                                                 categories=[10, 20, 30]))
    masker = jaxshap.maskers.Empirical(numeric)
    X = numeric.iloc[:4]
    ex = jaxshap.ExactExplainer(model, masker)
    with pytest.raises(ValueError, match=r"column 'colour' holds numbers, but the masker read it as a category"):
        ex(X.assign(colour=X["colour"].astype(float)))
    np.testing.assert_array_equal(np.asarray(ex(X).data)[:, 1], X["colour"].map({10: 0, 20: 1, 30: 2}).to_numpy())


def test_encode_categories_against_a_table():
    """The conversion alone: labels to the given codes, missing values to NaN, numbers kept."""
    frame = pd.DataFrame({"x": [1.5, 2.5, 3.5, 4.5],
                          "c": pd.Categorical(["b", None, "a", "b"], categories=["b", "a"]),
                          "k": [2, 0, 1, 1]})
    out = encode_categories(frame, {1: ("a", "b"), 2: ("p", "q", "r")})
    np.testing.assert_array_equal(out["c"].to_numpy(), [1.0, np.nan, 0.0, 1.0])
    np.testing.assert_array_equal(out["k"].to_numpy(), [2, 0, 1, 1])  # numeric: codes already
    assert frame["c"].dtype == "category"  # the caller's frame is left alone
    assert frame_categories(frame) == {1: ("b", "a")}
    plain = np.ones((2, 3))
    assert encode_categories(plain, {1: ("a",)}) is plain


def test_generative_saves_its_categories(train, maskers, tmp_path):
    path = tmp_path / "g.npz"
    maskers["Generative"].save(str(path))
    loaded = jaxshap.maskers.Generative.load(str(path))
    assert loaded.column_categories == {1: tuple(CATEGORIES)}
    X = explicands(train)
    ex = jaxshap.ExactExplainer(model, loaded)
    np.testing.assert_array_equal(np.asarray(ex(X).values), np.asarray(ex(by_hand(X)).values))
