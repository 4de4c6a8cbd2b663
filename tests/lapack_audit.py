"""A test helper that finds LAPACK calls a compiled XLA program may run side by side.

On a CPU, jaxlib 0.10 runs each batched LAPACK custom call (``lapack_?potrf_ffi``,
``?trsm``, ``?syevd``, ``?getrf``, ...) by splitting its batch over XLA's intra-op thread pool
(``jax::ParallelBatchMap``) and blocking the pool thread that runs the call until the parts
finish. XLA's thunk executor runs independent operations of one computation concurrently, so
when as many such calls as the pool has threads are in flight at once, every pool thread waits
for work that no thread is left to do and the program hangs. A 2-core machine has a pool of two:
two independent batched Cholesky factorisations in one program are enough.

:func:`audit` reads the optimised HLO of a jitted function and reports every pair of LAPACK
calls in one computation that no data (or control) dependency orders. A loop, call or
conditional whose body holds a LAPACK call counts as one at its call site, so two independent
loops that each factorise are reported too. A program with no such pair runs at most one
LAPACK call at a time and cannot hang this way.
"""

from __future__ import annotations

import dataclasses
import os
import itertools
import re
from typing import Any, Callable

import jax
import numpy as np

_HEADER = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+)\s*\(.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(.*)$")
_NAME = re.compile(r"%([\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_SHAPE = re.compile(r"^\(?\s*\w+\[([\d,]*)\]")


@dataclasses.dataclass(frozen=True)
class LapackCall:
    """One LAPACK call site (or a loop/call that holds one) in a computation."""

    name: str
    target: str  # the custom-call target, or "<op> holding <targets>"
    batched: bool  # its first operand is a batch of more than one matrix (jaxlib splits those)
    where: str  # the innermost jaxshap source line that emitted it, when known


@dataclasses.dataclass(frozen=True)
class Pair:
    """Two LAPACK calls in one computation that no dependency orders."""

    computation: str
    first: LapackCall
    second: LapackCall

    @property
    def batched(self) -> bool:
        return self.first.batched and self.second.batched

    def __str__(self) -> str:
        show = lambda c: f"{c.name} [{c.target}{', batched' if c.batched else ''}] at {c.where}"
        return f"in {self.computation}: {show(self.first)}  ||  {show(self.second)}"


def _locations(text: str) -> dict[int, str]:
    """Stack-frame id -> innermost ``jaxshap/...:line`` from the module's debug tables."""
    sections: dict[str, dict[int, str]] = {}
    current = None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = sections.setdefault(line, {})
            continue
        if not line.strip() or line.startswith(("HloModule", "%", "ENTRY")):
            current = None
            continue
        if current is not None:
            key, _, rest = line.partition(" ")
            current[int(key)] = rest
    files = {k: v.strip('"') for k, v in sections.get("FileNames", {}).items()}
    locs = {}
    for k, v in sections.get("FileLocations", {}).items():
        fid = int(re.search(r"file_name_id=(\d+)", v).group(1))
        line = re.search(r"\bline=(\d+)", v).group(1)
        locs[k] = (files.get(fid, "?"), int(line))
    frames = {}
    for k, v in sections.get("StackFrames", {}).items():
        loc = int(re.search(r"file_location_id=(\d+)", v).group(1))
        parent = int(re.search(r"parent_frame_id=(\d+)", v).group(1))
        frames[k] = (loc, parent)
    out = {}
    for k in frames:
        seen, frame, where = set(), k, None
        while frame in frames and frame not in seen:
            seen.add(frame)
            loc, parent = frames[frame]
            path, line = locs.get(loc, ("?", 0))
            if "/jaxshap/" in path and where is None:
                where = f"jaxshap/{path.split('/jaxshap/', 1)[1]}:{line}"
            frame = parent
        out[k] = where or "?"
    return out


def _computations(text: str) -> dict[str, list[tuple[str, str]]]:
    """Computation name -> its instructions as ``(name, text after '=')``."""
    comps: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in text.splitlines():
        head = _HEADER.match(line)
        if head:
            current = comps.setdefault(head.group(1), [])
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is not None:
            instr = _INSTR.match(line)
            if instr:
                current.append((instr.group(1), instr.group(2)))
    return comps


def find_pairs(hlo_text: str) -> list[Pair]:
    """Every pair of LAPACK calls in one computation of ``hlo_text`` that no dependency orders."""
    comps = _computations(hlo_text)
    where = _locations(hlo_text)
    # The LAPACK calls of each computation, directly or through the computations it calls,
    # as (target, batched).
    direct: dict[str, set[tuple[str, bool]]] = {}
    for c, instrs in comps.items():
        direct[c] = set()
        for _, body in instrs:
            target = _TARGET.search(body)
            if target and "lapack" in target.group(1):
                direct[c].add((target.group(1), _batch_size(instrs, _first_operand(body)) > 1))
    calls = {c: {n for _, body in instrs for n in _NAME.findall(body) if n in comps} for c, instrs in comps.items()}
    holds: dict[str, set[tuple[str, bool]]] = {}

    def held(c: str, stack=()) -> set[tuple[str, bool]]:
        if c not in holds:
            out = set(direct[c])
            for d in calls[c]:
                if d not in stack:
                    out |= held(d, stack + (c,))
            holds[c] = out
        return holds[c]

    pairs = []
    for comp, instrs in comps.items():
        names = {n for n, _ in instrs}
        deps = {n: [o for o in _NAME.findall(body) if o in names and o != n] for n, body in instrs}
        sites = []
        for n, body in instrs:
            target = _TARGET.search(body)
            frame = _FRAME.search(body)
            loc = where.get(int(frame.group(1)), "?") if frame else "?"
            if target and "lapack" in target.group(1):
                batch = _batch_size(instrs, _first_operand(body))
                sites.append(LapackCall(n, target.group(1), batch > 1, loc))
            else:
                inner = set()
                for d in _NAME.findall(body):
                    if d in comps:
                        inner |= held(d)
                if inner:
                    op = re.match(r"^.*?\s([\w\-]+)\(", body)
                    targets = ", ".join(sorted({t for t, _ in inner}))
                    kind = op.group(1) if op else "op"
                    sites.append(LapackCall(n, f"{kind} holding {targets}", any(b for _, b in inner), loc))
        if len(sites) < 2:
            continue
        ancestors: dict[str, set[str]] = {}

        def up(n: str) -> set[str]:
            # iterative to stay clear of the recursion limit on long programs
            if n in ancestors:
                return ancestors[n]
            todo = [n]
            while todo:
                x = todo[-1]
                missing = [d for d in deps[x] if d not in ancestors]
                if missing:
                    todo.extend(missing)
                    continue
                todo.pop()
                acc = set(deps[x])
                for d in deps[x]:
                    acc |= ancestors[d]
                ancestors[x] = acc
            return ancestors[n]

        for a, b in itertools.combinations(sites, 2):
            if a.name not in up(b.name) and b.name not in up(a.name):
                pairs.append(Pair(comp, a, b))
    return pairs


def _first_operand(body: str) -> str:
    operand = re.search(r"custom-call\(([^)]*)\)", body)
    return operand.group(1).split(",")[0].strip().lstrip("%") if operand else ""


def _batch_size(instrs: list[tuple[str, str]], name: str) -> int:
    """The product of the dimensions before the last two of operand ``name`` (1 for a matrix)."""
    for n, body in instrs:
        if n == name:
            shape = _SHAPE.match(body)
            dims = [int(d) for d in shape.group(1).split(",") if d] if shape else []
            return int(np.prod(dims[:-2])) if len(dims) > 2 else 1
    return 1


def compiled_text(fn: Callable, *args: Any) -> str:
    """The optimised HLO of ``jax.jit(fn)`` at ``args``."""
    return jax.jit(fn).lower(*args).compile().as_text()


def audit(fn: Callable, *args: Any) -> list[Pair]:
    """The LAPACK calls of ``jax.jit(fn)(*args)`` that may run side by side (see the module)."""
    return find_pairs(compiled_text(fn, *args))


def count_calls(hlo_text: str) -> int:
    """How many LAPACK custom calls ``hlo_text`` holds (to tell that an audit saw some)."""
    return sum("lapack" in t for t in _TARGET.findall(hlo_text))


def compiled_programs(call: Callable[[], Any]) -> list[tuple[str, str]]:
    """``(name, optimised HLO)`` of every XLA program compiled while ``call()`` runs.

    Clears JAX's caches first so that programs compiled earlier in the process are compiled
    (and seen) again. Hooks ``jax._src.interpreters.pxla.MeshComputation.compile``, the step
    every ``jax.jit`` dispatch and ``.lower().compile()`` goes through in jax 0.10; if a later
    jax moves it, this raises rather than seeing nothing.
    """
    from jax._src.interpreters import pxla

    original = pxla.MeshComputation.compile
    seen: list[tuple[str, str]] = []

    def compile_and_keep(self, *args, **kwargs):
        executable = original(self, *args, **kwargs)
        seen.append((getattr(self, "_name", "?"), executable.as_text() or ""))
        return executable

    jax.clear_caches()
    pxla.MeshComputation.compile = compile_and_keep
    stored = os.environ.get("JAXSHAP_CACHE_DIR")
    os.environ["JAXSHAP_CACHE_DIR"] = "off"  # jaxshap's program store would load, not compile
    try:
        jax.block_until_ready(call())
    finally:
        pxla.MeshComputation.compile = original
        if stored is None:
            del os.environ["JAXSHAP_CACHE_DIR"]
        else:
            os.environ["JAXSHAP_CACHE_DIR"] = stored
    if not seen:
        raise RuntimeError("no program was compiled: the compile hook no longer sees jax.jit")
    return seen


def audit_call(call: Callable[[], Any]) -> tuple[list[Pair], int]:
    """The unordered LAPACK pairs of every program ``call()`` compiles, and their LAPACK calls."""
    pairs, calls = [], 0
    for name, text in compiled_programs(call):
        calls += count_calls(text)
        pairs += [dataclasses.replace(p, computation=f"{name}/{p.computation}") for p in find_pairs(text)]
    return pairs, calls
