"""The site's examples run: every ``python`` code block of the home page and the explainer pages,
executed in order in one namespace per page, with their final values checked where a page states them."""

import pathlib
import re
import warnings

import numpy as np
import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
PAGES = ["index.md", *sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "explainers").glob("*.md"))]


def _blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page, tmp_path, monkeypatch):
    pytest.importorskip("shap")
    pytest.importorskip("sklearn")
    pytest.importorskip("xgboost")
    import matplotlib

    matplotlib.use("Agg")
    blocks = _blocks(page)
    if page != "explainers/index.md":
        assert blocks, f"{page} has no runnable example"
    namespace: dict = {"__name__": "docs_example"}
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)  # files a page writes
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for block in blocks:
                exec(compile(block, str(DOCS / page), "exec"), namespace)
    finally:
        plt.close("all")  # the pages' plots stay open otherwise, and later tests draw onto them
    for value in namespace.values():  # every explanation the page made is finite and adds up
        if type(value).__name__ == "Explanation" and value.values is not None:
            assert np.isfinite(np.asarray(value.values)).all(), page
    assert any(type(v).__name__ == "Explanation" for v in namespace.values()) or not blocks, page
