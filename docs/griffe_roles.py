"""A griffe extension (named in mkdocs.yml) that turns the docstrings' reStructuredText markup
into what the site renders.

The package's docstrings are Google style with Sphinx roles, which mkdocstrings would print as
raw text. When griffe has loaded ``jaxshap``, every docstring is rewritten once:

* ``:math:`x``` becomes inline math ``\\(x\\)`` and a ``.. math::`` block display math;
* ``:class:``, ``:func:``, ``:meth:``, ``:attr:``, ``:mod:``, ``:data:``, ``:obj:`` and ``:exc:``
  roles are resolved the way Python would resolve the name in the docstring's own module (its
  globals, a leading ``.`` relative to the package, a ``Class.member`` path). A target the API
  reference documents becomes an autorefs cross-reference (``[`Name`][jaxshap.Name]``), which
  ``mkdocs build --strict`` fails on if it does not resolve; any other target (a private helper,
  another library) becomes inline code. ``~`` shows the last part only, as in Sphinx.

A role left over after this, anywhere on the site, fails the build (``docs/hooks.py``).
"""

from __future__ import annotations

import importlib
import re
import textwrap
import types
from typing import Any

import griffe

PUBLIC_MODULES = ["jaxshap", "jaxshap.maskers", "jaxshap.estimators", "jaxshap.coalitions",
                  "jaxshap.trees", "jaxshap.plots", "jaxshap.datasets", "jaxshap.explainers"]
ROLE = re.compile(r":(class|func|meth|attr|mod|data|obj|exc):`([^`]+)`")
MATH_ROLE = re.compile(r":math:`([^`]+)`")
MATH_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*\n(?P<body>(?:(?:(?P=indent)[ \t]+.*)?\n)+)", re.M)


def _public_paths() -> dict[int, str]:
    """``id(object) -> 'jaxshap.module.Name'`` for every public name, its first public module winning."""
    paths: dict[int, str] = {}
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name, None)
            if obj is None or isinstance(obj, (int, float, str, bool, tuple)):
                continue
            paths.setdefault(id(obj), f"{modname}.{name}")
        paths.setdefault(id(module), modname)
    return paths


def _lookup(target: str, module: types.ModuleType, owner: type | None) -> list[tuple[str, Any]] | None:
    """The chain of ``(name, object)`` that ``target`` names from ``module`` (and ``owner``, a
    class), or None."""
    parts = target.split(".")
    starts: list[tuple[Any, list[str]]] = []
    if target.startswith("."):  # relative to the package of the docstring's module
        package = module.__name__.rsplit(".", 1)[0]
        parts = [p for p in parts if p]
        starts.append((importlib.import_module(package), parts))
    else:
        if owner is not None:
            starts.append((owner, parts))
        if parts[0] in vars(module):
            starts.append((module, parts))
        for i in range(len(parts), 0, -1):  # a dotted module path, then attributes
            try:
                starts.append((importlib.import_module(".".join(parts[:i])), parts[i:]))
                break
            except ImportError:
                continue
    for obj, rest in starts:
        chain = [("", obj)]
        for part in rest:
            if isinstance(obj, types.ModuleType) and not hasattr(obj, part):
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{part}")
                except ImportError:
                    break
            elif not hasattr(obj, part):
                break
            else:
                obj = getattr(obj, part)
            chain.append((part, obj))
        else:
            return chain
    return None


def _rendered(parent: Any, name: str, member: Any) -> bool:
    """Whether the API reference renders ``member`` under ``parent``: a module's member, or a
    class's own (not inherited) member with a docstring of its own."""
    if isinstance(parent, types.ModuleType):
        return True
    own = vars(parent).get(name) if isinstance(parent, type) else None
    return own is not None and bool(getattr(own, "__doc__", None)) and own.__doc__ != type(own).__doc__


def _public_path(chain: list[tuple[str, Any]], paths: dict[int, str]) -> str | None:
    """The public dotted path of the last object in ``chain``: the last object named publicly
    itself, or a public member of a public object before it."""
    for i in range(len(chain) - 1, -1, -1):
        base = paths.get(id(chain[i][1]))
        if base is not None:
            rest = chain[i + 1:]
            for (_, parent), (name, member) in zip(chain[i:], rest):
                if name.startswith("_") or not _rendered(parent, name, member):
                    return None
            return ".".join([base, *(name for name, _ in rest)])
    return None


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the loaded package (see the module docstring)."""

    def __init__(self) -> None:
        self._paths: dict[int, str] | None = None

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "jaxshap":
            return
        self._paths = _public_paths()
        self._walk(pkg, set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = self.rewrite(obj.docstring.value, obj)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, seen)

    def rewrite(self, text: str, obj: griffe.Object) -> str:
        path = obj.module.path.removesuffix(".__main__")  # never run a __main__ module
        module = importlib.import_module(path)
        owner = None
        if obj.is_class:
            owner = _lookup(obj.name, module, None)
        elif obj.parent is not None and obj.parent.is_class:
            owner = _lookup(obj.parent.name, module, None)
        owner = owner[-1][1] if owner else None

        def block(m: re.Match) -> str:
            body = textwrap.dedent(m.group("body")).strip("\n")
            indent = m.group("indent")
            return f"{indent}$$\n" + textwrap.indent(body, indent) + f"\n{indent}$$\n\n"

        def role(m: re.Match) -> str:
            target = m.group(2).strip()
            short = target.startswith("~")
            target = target.lstrip("~")
            shown = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
            chain = _lookup(target, module, owner)
            path = _public_path(chain, self._paths) if chain else None
            return f"[`{shown}`][{path}]" if path else f"`{shown}`"

        text = MATH_BLOCK.sub(block, text)
        text = MATH_ROLE.sub(lambda m: "\\(" + m.group(1) + "\\)", text)
        return ROLE.sub(role, text)
