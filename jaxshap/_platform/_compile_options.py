"""XLA compile options for jaxshap's compiled programs, and a ``jax.jit`` that applies them.

On a CPU, compiling is most of a cold call: XLA lowers every fusion of a program to its own LLVM
module and optimises each one. XLA's fusion emitters (MLIR-based, the default in the jaxlib of this
writing) take longer per fusion than its earlier LLVM emitters, for kernels as fast: on a 2-core CPU, KernelExplainer's program (M = 30, 600 coalitions, 40 rows)
compiled in 1.0-1.1 s against 1.4-1.7 s with the leading-terms prior, and in 0.35-0.5 s against
0.5-0.7 s for plain KernelSHAP, with equal results to the bit (``CHANGELOG.md``). So the
explainers' program (:func:`jaxshap._engine._program.block_program`, a :class:`Program`) compiles on
a CPU with ``xla_cpu_use_fusion_emitters=False``.

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


class Program:
    """``jax.jit(fn, **jit_kwargs)`` compiled with :func:`compile_options`, made on first use.

    The options depend on the backend, which is known only once JAX has started one, so the
    jitted function is built at the first call (or ``lower``), not at import. JAX takes compile
    options only for a top-level program: called inside a trace (a user's ``jax.jit``,
    ``jax.grad``, ``jax.vmap``), the function runs as a plain ``jax.jit``, part of the caller's
    program. Every other attribute (``lower``, ``trace``, ``_cache_size``, ...) is the top-level
    jitted function's.
    """

    def __init__(self, fn: Callable[..., Any], **jit_kwargs: Any):
        self._fn = fn
        self._jit_kwargs = jit_kwargs
        self._jitted = None
        self._nested = None
        functools.update_wrapper(self, fn)

    @property
    def jitted(self) -> Any:
        """The top-level jitted function, with the options (built on first access)."""
        if self._jitted is None:
            options = dict(compile_options())
            kwargs = dict(self._jit_kwargs, compiler_options=options) if options else self._jit_kwargs
            self._jitted = jax.jit(self._fn, **kwargs)
        return self._jitted

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves((args, kwargs))):
            if self._nested is None:
                self._nested = jax.jit(self._fn, **self._jit_kwargs)
            return self._nested(*args, **kwargs)
        return self.jitted(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fn", "_jit_kwargs", "_jitted", "_nested"):
            raise AttributeError(name)
        return getattr(self.jitted, name)


def program(fn: Callable[..., Any] | None = None, **jit_kwargs: Any) -> Any:
    """A decorator like ``functools.partial(jax.jit, **jit_kwargs)`` that returns a :class:`Program`."""
    if fn is None:
        return functools.partial(program, **jit_kwargs)
    return Program(fn, **jit_kwargs)
