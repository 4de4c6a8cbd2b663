"""XLA compile options for jaxshap's compiled programs, and a ``jax.jit`` that applies them.

On a CPU, compiling is most of a cold call: XLA lowers every fusion of a program to its own LLVM
module and optimises each one. XLA's fusion emitters (MLIR-based, the default in the jaxlib of
this writing) take longer per fusion than its earlier LLVM emitters: on a 2-core CPU,
KernelExplainer's program (M = 30, 600 coalitions, 40 rows) compiled in 1.0-1.1 s against
1.4-1.7 s with the leading-terms prior, and in 0.35-0.5 s against 0.5-0.7 s for plain
KernelSHAP, with equal results to the bit, and the warm calls of the Kernel, Exact and
Permutation explainers took as long. TreeSHAP's kernels, though, ran 2.1-2.2x slower with the
LLVM emitters (``CHANGELOG.md``). So the explainers' program
(:func:`jaxshap._engine._program.block_program`, a :class:`Program`) compiles on a CPU with
``xla_cpu_use_fusion_emitters=False`` for the explainers that ask for it
(``RowExplainer.compile_tuned``: the coalition explainers), with XLA's defaults for the others.

The option is XLA's, per program, and leaves the user's own programs alone. It is passed only
when the default backend is a CPU, only when this jaxlib still knows it (checked once, on a
trivial program), and never when the user chose the emitters themselves in ``XLA_FLAGS``. Set
``JAXSHAP_XLA_DEFAULTS=1`` to compile jaxshap's programs with XLA's defaults.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp

CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
"""The options jaxshap's programs compile with on a CPU backend."""


@functools.lru_cache(maxsize=None)
def compile_options() -> tuple[tuple[str, Any], ...]:
    """The compile options of jaxshap's programs in this process, as ``(name, value)`` pairs
    (empty off a CPU, under ``JAXSHAP_XLA_DEFAULTS=1``, or where XLA_FLAGS or this jaxlib rule
    an option out)."""
    if os.environ.get("JAXSHAP_XLA_DEFAULTS", "").strip() not in ("", "0"):
        return ()
    if jax.default_backend() != "cpu":
        return ()
    flags = os.environ.get("XLA_FLAGS", "")
    options = {k: v for k, v in CPU_OPTIONS.items() if k not in flags}
    if not options:
        return ()
    try:  # a jaxlib that dropped an option refuses it ("No such compile option")
        jax.jit(jnp.negative).lower(jnp.zeros((), jnp.float32)).compile(compiler_options=options)
    except Exception:  # noqa: BLE001 - whatever the refusal, compile with XLA's defaults
        return ()
    return tuple(sorted(options.items()))


def _inside_a_trace(args: Any, kwargs: Any) -> bool:
    """Whether a JAX transformation is tracing now: its tracers may hide in closures (a model
    closing over parameters under ``jax.grad``), not only in the arguments."""
    try:
        from jax._src import core as jax_core

        clean = jax_core.trace_state_clean
    except (ImportError, AttributeError):  # pragma: no cover - a JAX without it: the arguments tell
        return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves((args, kwargs)))
    return not clean()


class Program:
    """A function compiled as ``jax.jit(fn, **jit_kwargs)``, with or without :func:`compile_options`.

    Some programs gain from the options and some lose (XLA's LLVM emitters run TreeSHAP's kernels
    2x slower), so the caller chooses per call (:meth:`call`); calling the object itself takes the
    options. The options depend on the backend, which is known only once JAX has started one, so
    the jitted functions are built on first use, not at import. JAX takes compile options only
    for a top-level program: called inside a trace (a user's ``jax.jit``, ``jax.grad``,
    ``jax.vmap``), the function runs as a plain ``jax.jit``, part of the caller's program. Every
    other attribute (``lower``, ``trace``, ``_cache_size``, ...) is that of the jitted function
    with the options.
    """

    def __init__(self, fn: Callable[..., Any], **jit_kwargs: Any):
        self._fn = fn
        self._jit_kwargs = jit_kwargs
        self._jitted = None
        self._plain = None
        functools.update_wrapper(self, fn)

    @property
    def jitted(self) -> Any:
        """The jitted function with the options (built on first access); :attr:`plain` itself
        where there are none (off a CPU), so both choices share one jitted function and its cache."""
        if self._jitted is None:
            options = dict(compile_options())
            self._jitted = jax.jit(self._fn, compiler_options=options, **self._jit_kwargs) if options else self.plain
        return self._jitted

    @property
    def plain(self) -> Any:
        """The jitted function with XLA's defaults."""
        if self._plain is None:
            self._plain = jax.jit(self._fn, **self._jit_kwargs)
        return self._plain

    def jitted_for(self, tuned: bool, args: Any = (), kwargs: Any = None) -> Any:
        """:attr:`jitted` (``tuned``) or :attr:`plain`; :attr:`plain` inside a trace (of ``args``,
        ``kwargs`` or a closure)."""
        return self.jitted if tuned and not _inside_a_trace(args, kwargs or {}) else self.plain

    def call(self, tuned: bool, *args: Any, **kwargs: Any) -> Any:
        """Run it with the options (``tuned``) or XLA's defaults; inside a trace, plainly."""
        return self.jitted_for(tuned, args, kwargs)(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(True, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fn", "_jit_kwargs", "_jitted", "_plain"):
            raise AttributeError(name)
        return getattr(self.jitted, name)


def program(fn: Callable[..., Any] | None = None, **jit_kwargs: Any) -> Any:
    """A decorator like ``functools.partial(jax.jit, **jit_kwargs)`` that returns a :class:`Program`."""
    if fn is None:
        return functools.partial(program, **jit_kwargs)
    return Program(fn, **jit_kwargs)
