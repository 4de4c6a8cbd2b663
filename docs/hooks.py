"""MkDocs hooks for the jaxshap site (named in mkdocs.yml; run by ``mkdocs build``).

* ``on_config``: executes the tutorials in ``notebooks/`` (committed without outputs) with
  nbclient into ``.cache/docs-notebooks/``, so the site shows their outputs and plots; a cell
  that raises fails the build. ``JAXSHAP_NOTEBOOK_QUICK=1`` is set for them (small sizes), as
  in ``tests/test_notebooks.py``, unless ``JAXSHAP_DOCS_FULL_NOTEBOOKS=1``. A notebook that
  the tests (or an earlier build) executed on the same notebook and package is not executed
  again (``docs/executed_notebooks.py``); ``JAXSHAP_DOCS_REUSE_NOTEBOOKS=1`` reuses the stored
  ones even when stale (local iteration on the text).
* ``on_files``: adds the executed notebooks and the generated benchmarks page to the site.
* ``on_pre_build``: fails the build (a warning, which ``--strict`` turns into an error) when a
  public name has no docstring or no entry on an API page.
* ``on_post_page``: loads the site's MathJax on every page (and drops the notebook pages' own
  MathJax tag, so it loads once); fails the build on reStructuredText markup left as raw text
  (a Sphinx role or directive that ``docs/griffe_roles.py`` did not rewrite).
* ``on_post_build``: copies MathJax from the ``jupyter-server-mathjax`` wheel into the site, so
  formulas render without a CDN.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = ["jaxshap", "jaxshap.maskers", "jaxshap.estimators", "jaxshap.coalitions",
                  "jaxshap.trees", "jaxshap.plots", "jaxshap.datasets", "jaxshap.explainers"]
log = logging.getLogger("mkdocs.hooks.jaxshap")


def on_config(config):
    sys.path.insert(0, str(ROOT / "docs"))
    import executed_notebooks as executed

    quick = os.environ.get("JAXSHAP_DOCS_FULL_NOTEBOOKS") != "1"
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    reuse_any = os.environ.get("JAXSHAP_DOCS_REUSE_NOTEBOOKS") == "1"
    if reuse_any and all((executed.CACHE / p.name).exists() for p in notebooks):
        return config  # reuse the last executed notebooks, current or not (local iteration on the text)
    stale = [p for p in notebooks if executed.stored(p, quick) is None]
    if len(stale) < len(notebooks):
        log.info("reusing %d executed notebooks (same notebook and package)", len(notebooks) - len(stale))
    os.environ.update(executed.kernel_environment(quick))
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        list(pool.map(lambda p: executed.execute(p, quick), stale))
    for old in executed.CACHE.glob("*.ipynb"):
        if not (ROOT / "notebooks" / old.name).exists():
            old.unlink()  # a tutorial since removed or renamed
    return config


@event_priority(100)  # before mkdocs-jupyter reads the notebooks
def on_files(files, config):
    import executed_notebooks as executed
    import gen_bench

    for path in sorted(executed.CACHE.glob("*.ipynb")):
        files.append(File(f"notebooks/{path.name}", str(executed.CACHE.parent), config["site_dir"],
                          config["use_directory_urls"]))

    files.append(File.generated(config, "benchmarks.md", content=gen_bench.render()))
    return files


def _documented(modname: str, name: str, obj) -> bool:
    if isinstance(obj, (int, float, str, tuple)) and not isinstance(obj, bool):
        # constants: an attribute docstring (a string literal right after the assignment)
        import griffe

        try:
            target = griffe.load(modname, search_paths=[str(ROOT)])[name].final_target
        except Exception:
            return False
        return bool(target.docstring and target.docstring.value.strip())
    return bool((getattr(obj, "__doc__", None) or "").strip())


def on_pre_build(config):
    pages = "\n".join(p.read_text() for p in (ROOT / "docs" / "api").glob("*.md"))
    entries = set(re.findall(r"^::: ([\w.]+)", pages, flags=re.M))
    for modname in PUBLIC_MODULES:
        try:
            module = importlib.import_module(modname)
        except ModuleNotFoundError:
            continue  # jaxshap.explainers: documented once it exists
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")
                                                     and getattr(vars(module)[n], "__module__", None) == modname]
        for name in names:
            obj = getattr(module, name)
            full = f"{modname}.{name}"
            if not _documented(modname, name, obj):
                log.warning("public name %s has no docstring", full)
            if full not in entries and not (isinstance(obj, type(module)) and obj.__name__ in entries):
                log.warning("public name %s has no entry on an API page (docs/api/*.md)", full)


RAW_MARKUP = re.compile(r":(?:class|func|meth|attr|mod|data|obj|exc|math|ref|doc):(?:<code>|`)|\.\. [a-z-]+::")


def on_post_page(output, page, config):
    from mkdocs.utils import get_relative_url

    for raw in RAW_MARKUP.finditer(output):
        context = re.sub(r"<[^>]+>", "", output[max(0, raw.start() - 60): raw.end() + 60])
        log.warning("%s: reStructuredText markup shown as raw text: ...%s...", page.file.src_uri, context)

    # a notebook page's own MathJax tag goes; every page loads the site's MathJax once, by a path
    # relative to the page (notebook pages do not rewrite extra_javascript paths)
    output = re.sub(r'<script src="jaxshap-site-mathjax.js">\s*</script>', "", output)
    scripts = "".join(
        f'<script src="{get_relative_url(path, page.url)}"></script>'
        for path in ("assets/mathjax-config.js", "assets/mathjax/MathJax.js")
    ).replace("MathJax.js\"", "MathJax.js?config=TeX-AMS-MML_HTMLorMML-full\"")
    return output.replace("</body>", scripts + "</body>", 1)


def on_post_build(config):
    import jupyter_server_mathjax

    src = Path(jupyter_server_mathjax.__file__).parent / "static"
    shutil.copytree(src, Path(config["site_dir"]) / "assets" / "mathjax", dirs_exist_ok=True)
