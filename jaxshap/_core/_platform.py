"""The host platform: settings read from the environment, BLAS threads, the LAPACK call order, and
compiled programs kept across processes (jaxshap's own store; JAX's persistent cache switch).

Environment settings: the package reads ``os.environ`` here and nowhere else.

* ``JAXSHAP_CACHE_DIR``: the folder of jaxshap's compilation caches, ``~/.cache/jaxshap/xla`` when
  unset or empty (:func:`cache_dir`): jaxshap's own compiled programs
  (:func:`cached_jit`) in its ``programs`` subfolder (:func:`program_cache_dir`),
  and JAX's cache when :func:`jaxshap.enable_compilation_cache` turns it on. ``off`` turns
  jaxshap's own store off.

One BLAS thread while the library's linear algebra runs (:func:`one_blas_thread`). On a CPU,
XLA's linear algebra (``eigvalsh``, ``cholesky``, triangular solves) is handed to LAPACK from
SciPy, which runs on SciPy's OpenBLAS; NumPy brings its own. OpenBLAS starts worker threads on a
large call, and they keep spinning for a while after it: beside XLA's own thread pool on a
machine with few busy cores they starve the work around them, the factorisation itself included.
:func:`one_blas_thread` holds the BLAS libraries at one thread for a block and restores their
counts after, with ``threadpoolctl`` (scikit-learn depends on it); without it the block runs as
it is. Programs you compile yourself (a ``jax.jit`` around an explainer) are not covered: start
Python with ``OPENBLAS_NUM_THREADS=1``, or wrap the call in ``threadpoolctl.threadpool_limits(1)``.

One LAPACK call at a time, ordering independent factorisations by a data dependency
(:func:`after`). A workaround for jaxlib 0.10 on a CPU, needed for correctness (without it a
program can hang forever). jaxlib 0.10.x runs a batched LAPACK custom call (Cholesky, triangular
solve, symmetric eigensolver, ...) by splitting its batch over XLA's intra-op thread pool
(``jax::ParallelBatchMap`` in ``jaxlib/cpu/lapack_kernels.cc``) and blocking the pool thread that
runs the call until the parts are done. XLA runs the independent operations of one program side
by side, so two batched calls that no data dependency orders can each hold a pool thread while
they wait for parts queued behind the other; on a pool of two threads (a 2-core machine) the
program then hangs with every thread idle. Upstream: this batch-splitting path is the one of
jax-ml/jax#39292 (batched ``eigh`` oversubscribing OpenBLAS, open) and jax-ml/jax#39383, whose
description says open-source builds of later jaxlib releases run the parts serially (not checked
here); no upstream report of the hang itself was found. On jax 0.10.2 two independent batched
Cholesky factorisations in one ``jax.jit`` still hang a two-thread pool (``tests/test_lapack_order.py``
runs that program with and without :func:`after`). Remove :func:`after` once the package requires
a jaxlib whose test passes without it.

:func:`after` makes a value depend on others by adding a zero computed from them. The
dependency has to be arithmetic: ``jax.lax.optimization_barrier`` does not survive XLA's CPU
pipeline (it is expanded away before the thunks are scheduled, and the thunk executor orders
thunks by the buffers they share). The zero is ``-(0 * y)`` with ``y`` the sum of the largest
finite magnitudes of the dependencies (a reduction over all of their elements), which XLA
does not fold for floats (``0 * y`` is not ``0`` when ``y`` may be infinite or NaN), and adding
``-0.0`` leaves every float unchanged, signed zeros and NaNs included; so the result equals
``x`` bit for bit.

Compiled programs kept across processes. A first explanation spends most of its time in XLA's
compiler. :func:`cached_jit` is ``jax.jit`` for jaxshap's own programs, with one addition: the
first call of a signature (the arguments' tree, shapes, dtypes and shardings, and the static
arguments) lowers the program and looks its compiled executable up on disk before compiling it;
a compiled executable is written there for the next process
(``jax.experimental.serialize_executable``). Later calls of the signature in the process call
the executable directly.

Why its own store and not JAX's persistent compilation cache: that cache is one global setting
of the user's JAX (:func:`enable_compilation_cache` turns it on for everything, behind one
switch); this one touches only jaxshap's programs and leaves JAX's configuration as the user set
it.

* Key: SHA-256 of the lowered program's text (the model's own code and every shape and dtype are
  in it), the jax and jaxlib versions, the backend, the device kind and count.
* Safe with several processes: an entry is written to a temporary file and renamed into place;
  readers see a whole entry or none.
* Never trusted blindly: an entry holds the SHA-256 of its payload; a truncated, corrupt or
  unloadable entry is deleted and the program compiled again.
* Bounded: after a write, the oldest entries (by last use) go until the folder holds at most
  :data:`MAX_BYTES`.
* Programs that call back into Python (a NumPy model through ``pure_callback``) cannot be
  serialised, and programs with large constants moved out of their text (arrays a model closes
  over) cannot be keyed by their text; they are compiled as usual. So are traced calls (inside the user's ``jit`` or
  ``grad``), calls on several devices, programs partitioned over several devices, and every
  program of a process that sees several local devices (jax 0.10.2 loads a stored one-device
  executable there as one that expects arguments on all of them).
* ``JAXSHAP_CACHE_DIR`` names the folder (default ``~/.cache/jaxshap/xla``); ``off`` turns the
  store off (:func:`program_cache_dir`).

JAX's persistent compilation cache (:func:`enable_compilation_cache`) writes every compiled
program to a folder and loads it in later processes instead of compiling again. jaxshap's
programs take their arrays as arguments (never as embedded constants), so the same explainer
configuration on the same shapes hits the cache across processes.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import os
import tempfile
import threading
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import jaxlib


CACHE_DIR_VARIABLE = "JAXSHAP_CACHE_DIR"


def cache_dir() -> str:
    """The compilation cache's folder: ``$JAXSHAP_CACHE_DIR``, else ``~/.cache/jaxshap/xla``."""
    return os.environ.get(CACHE_DIR_VARIABLE) or os.path.join(os.path.expanduser("~"), ".cache", "jaxshap", "xla")


def program_cache_dir() -> str | None:
    """The folder of jaxshap's own compiled programs, ``None`` when ``JAXSHAP_CACHE_DIR=off``."""
    if os.environ.get(CACHE_DIR_VARIABLE, "").strip().lower() == "off":
        return None
    return os.path.join(cache_dir(), "programs")


def _initialize_lapack() -> None:
    """Load the LAPACK that jaxlib calls on a CPU (as lowering a linear-algebra operation would),
    so that its BLAS is loaded, and can be held, before the first program that uses it runs."""
    try:
        from jax._src.lax import linalg
    except ImportError:  # pragma: no cover - a JAX without the hook: the first call is not held
        return
    init = getattr(linalg, "initialize_lapack", None)
    if init is not None:
        init()


@contextlib.contextmanager
def one_blas_thread(lapack: bool = False) -> Iterator[None]:
    """Run a block with the loaded BLAS libraries at one thread, restored after.

    Args:
      lapack: hold only the BLAS behind jaxlib's LAPACK (loaded first), and leave NumPy's own
        to the block's other work (a host model's matrix products); by default every BLAS.

    The block must wait for its results (``np.asarray`` or ``block_until_ready``): work still
    running after it has the old counts.
    """
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        yield
        return
    if lapack:
        _initialize_lapack()
    controller = ThreadpoolController()
    if lapack:
        own = (f"{os.sep}numpy.libs{os.sep}", f"{os.sep}numpy{os.sep}")
        paths = [i["filepath"] for i in controller.info() if i["user_api"] == "blas" and not any(o in i["filepath"] for o in own)]
        controller = controller.select(filepath=paths) if paths else None
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def _zero(deps: Any) -> jax.Array | None:
    """A float32 ``-0.0`` that XLA computes from every element of ``deps`` (``None`` if empty).

    Every element, not one: XLA would trace a single element of a concatenation back to the
    one part it came from, and the dependency on the other parts would be lost.
    """
    leaves = [jnp.asarray(leaf) for leaf in jax.tree_util.tree_leaves(deps)]
    leaves = [leaf for leaf in leaves if leaf.size]
    if not leaves:
        return None
    total = jnp.zeros((), jnp.float32)
    for leaf in leaves:
        y = jnp.abs(leaf.astype(jnp.float32) if not jnp.iscomplexobj(leaf) else leaf).astype(jnp.float32)
        total = total + jnp.max(jnp.where(jnp.isfinite(y), y, 0.0))
    total = jnp.where(jnp.isfinite(total), total, 0.0)
    return jax.lax.stop_gradient(-(total * 0.0))


_UNTIED = contextvars.ContextVar("jaxshap_untied", default=False)


@contextlib.contextmanager
def untied() -> Iterator[None]:
    """Trace a program whose :func:`after` ties are dropped: for a program that only needs ``x``
    and not ``deps``, which XLA then removes as dead code (with their LAPACK calls)."""
    token = _UNTIED.set(True)
    try:
        yield
    finally:
        _UNTIED.reset(token)


def after(x: Any, *deps: Any) -> Any:
    """``x`` unchanged (bit for bit), but computed only once ``deps`` are (except under :func:`untied`).

    Use it on the input of a LAPACK call (``cho_factor``, ``eigvalsh``, ...) that would
    otherwise be independent of an earlier one: ``after(matrix, earlier_output)``.

    Args:
      x: a pytree of arrays (floating, integer or boolean).
      *deps: pytrees of arrays that must be computed first (the outputs of the earlier call).

    Returns:
      ``x``, each leaf depending on ``deps`` through a zero added to it.
    """
    zero = None if _UNTIED.get() else _zero(deps)
    if zero is None:
        return x

    def tie(leaf):
        leaf = jnp.asarray(leaf)
        if jnp.issubdtype(leaf.dtype, jnp.floating) or jnp.issubdtype(leaf.dtype, jnp.complexfloating):
            return leaf + zero.astype(leaf.dtype)
        if leaf.dtype == jnp.bool_:
            return leaf | (zero != 0.0)
        return leaf + (zero != 0.0).astype(leaf.dtype)

    return jax.tree_util.tree_map(tie, x)


MAX_BYTES = 2 * 2**30
"""The most the folder holds; the least recently used entries are deleted beyond it."""

_MAGIC = b"jaxshap-xla-1\n"


def _signature(args: tuple, static: dict) -> Any:
    """A hashable description of a call (``None`` when it must run through ``jax.jit``)."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    parts = []
    for leaf in leaves:
        if isinstance(leaf, jax.core.Tracer):
            return None  # inside the user's transformation
        if isinstance(leaf, jax.Array):
            if len(leaf.sharding.device_set) != 1:
                return None
            parts.append((jax.typeof(leaf), leaf.sharding))
        else:
            parts.append(jax.typeof(leaf))
    try:
        sig = (tree, tuple(sorted(static.items())), tuple(parts))
        hash(sig)
    except TypeError:
        return None
    return sig


def _entry_key(lowered: Any) -> str:
    device = jax.devices()[0]
    h = hashlib.sha256()
    for part in (jax.__version__, jaxlib.__version__, device.platform, device.device_kind, str(jax.device_count()), lowered.as_text()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _read(path: str) -> bytes | None:
    """The payload of a whole, unaltered entry, else ``None`` (a bad entry is deleted)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    head, digest, payload = data[: len(_MAGIC)], data[len(_MAGIC) : len(_MAGIC) + 32], data[len(_MAGIC) + 32 :]
    if head != _MAGIC or hashlib.sha256(payload).digest() != digest:
        _remove(path)
        return None
    try:
        os.utime(path)  # its last use, for eviction
    except OSError:
        pass
    return payload


def _write(folder: str, path: str, payload: bytes) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)
    except OSError:
        return  # a read-only or full disk: the program still runs
    _evict(folder)


def _evict(folder: str, max_bytes: int = MAX_BYTES) -> None:
    """Delete the least recently used entries until the folder holds at most ``max_bytes``."""
    entries = []
    for name in os.listdir(folder):
        if name.endswith(".xla"):
            try:
                st = os.stat(os.path.join(folder, name))
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, name))
    total = sum(size for _, size, _ in entries)
    for _, size, name in sorted(entries):
        if total <= max_bytes:
            break
        _remove(os.path.join(folder, name))
        total -= size


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _executable_inputs(lowered: Any) -> int | None:
    """How many inputs the executable takes (JAX keeps this private: ``None`` when unknown)."""
    try:
        return len(lowered._lowering.compile_args["global_in_avals"])
    except Exception:  # pragma: no cover - another JAX version
        return None


def _one_device(executable: Any) -> bool:
    """Whether every input and output of ``executable`` lives on one and the same device. A
    program that the compiler partitioned over several devices (a ``shard_map`` over a mesh
    can be lowered from single-device arguments) is not stored: loaded in a process whose
    arguments are placed otherwise it fails ("Expected args ... to have 2 shards")."""
    try:
        shardings = jax.tree_util.tree_leaves((executable.input_shardings, executable.output_shardings))
        devices = {d for sharding in shardings for d in sharding.device_set}
    except Exception:  # pragma: no cover - another JAX version: do not trust it
        return False
    return len(devices) <= 1


def _load_or_compile(lowered: Any, n_inputs: int) -> Any:
    """The executable of ``lowered`` on ``n_inputs`` leaves: from the folder when a good entry is
    there, else compiled (and written there when it can be serialised); ``None`` for a program
    whose executable takes other inputs too (large constants JAX moved out of the program's
    text, which ``jax.jit`` passes itself): its text, the key, does not hold their values."""
    from jax.experimental.serialize_executable import deserialize_and_load, serialize

    folder = program_cache_dir()
    if folder is None or _executable_inputs(lowered) != n_inputs or jax.local_device_count() != 1:
        # several local devices: a loaded executable, even a one-device one, expects arguments
        # on all of them ("Expected args ... to have 2 shards"; jax 0.10.2), so it is compiled
        return None
    path = os.path.join(folder, _entry_key(lowered) + ".xla")
    payload = _read(path)
    if payload is not None:
        try:
            loaded = deserialize_and_load(payload, lowered.in_tree, lowered.out_tree)
        except Exception:  # written by another jaxlib build, or damaged in a way the digest missed
            loaded = None
        if loaded is not None and _one_device(loaded):
            return loaded
        _remove(path)
    compiled = lowered.compile()
    if not _one_device(compiled):  # partitioned over several devices: never stored
        return compiled
    try:
        payload, _, _ = serialize(compiled)
    except Exception:  # host callbacks and other unserialisable programs
        return compiled
    _write(folder, path, payload)
    return compiled


def cached_jit(fn: Callable[..., Any] | None = None, *, static_argnames: tuple[str, ...] = ()) -> Any:
    """``jax.jit(fn, static_argnames=...)`` whose executables are kept across processes (see the
    module). ``fn`` takes named parameters only (no ``*args`` or ``**kwargs``)."""
    if fn is None:
        return functools.partial(cached_jit, static_argnames=static_argnames)
    jitted = jax.jit(fn, static_argnames=static_argnames)
    executables: dict = {}  # signature -> executable, for this function in this process
    pending: dict = {}  # signature -> the thread compiling it (see prepare)
    parameters = inspect.signature(fn)

    def split(args: tuple, kwargs: dict) -> tuple[tuple, dict, Any]:
        named = parameters.bind(*args, **kwargs).arguments
        static = {k: named.pop(k) for k in static_argnames if k in named}
        args = tuple(named.values())
        return args, static, _signature(args, static)

    def lowered(args: tuple, static: dict) -> tuple[Any, list, Any]:
        """The program on the flat leaves (its executable is called on them), lowered."""
        leaves, tree = jax.tree_util.tree_flatten(args)

        def on_leaves(*xs):
            return fn(*jax.tree_util.tree_unflatten(tree, xs), **static)

        on_leaves.__name__ = on_leaves.__qualname__ = fn.__name__  # as JAX's logs name the program
        flat = jax.jit(on_leaves, keep_unused=True)
        return flat, leaves, flat.lower(*leaves)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        args, static, sig = split(args, kwargs)
        if sig is None or program_cache_dir() is None:
            return jitted(*args, **static)
        if sig in pending:
            pending.pop(sig).join()
        compiled = executables.get(sig)
        if compiled is None:
            flat, leaves, low = lowered(args, static)
            compiled = executables[sig] = _load_or_compile(low, len(leaves)) or flat
        return compiled(*jax.tree_util.tree_leaves(args))

    def prepare(*args: Any, **kwargs: Any) -> Any:
        """Trace the program for arguments like these now and compile (or load) it in a
        background thread while the caller does other work. Returns the program's output
        shapes (``jax.ShapeDtypeStruct`` leaves), or ``None`` when it is compiled already or
        not kept (traced arguments, the store off). A call with arguments of the same types and
        shapes waits for that thread, then runs the program."""
        args, static, sig = split(args, kwargs)
        if sig is None or program_cache_dir() is None or sig in executables or sig in pending:
            return None
        flat, leaves, low = lowered(args, static)

        def work() -> None:
            try:
                executables.setdefault(sig, _load_or_compile(low, len(leaves)) or flat)
            except Exception:  # noqa: BLE001 - the call compiles it again and raises there
                pass

        thread = pending[sig] = threading.Thread(target=work, daemon=True)
        thread.start()
        return low.out_info

    call.jitted = jitted
    call.prepare = prepare
    call.lower = jitted.lower  # the program as jax.jit lowers it (tests read its HLO)
    call._cache_size = lambda: len(executables) + jitted._cache_size()  # noqa: SLF001 - as jax.jit's
    return call


def enable_compilation_cache(path: Any = None, *, min_compile_seconds: float = 0.0) -> str:
    """Turn on JAX's persistent compilation cache for this process, and return its folder.

    Call it once, best before the first explanation (programs compiled earlier are not written).
    Later processes that call it with the same folder load jaxshap's compiled programs
    instead of compiling them, which removes most of the first call's time.

    Args:
      path: the cache folder (created if needed); ``None`` means ``$JAXSHAP_CACHE_DIR`` or
        ``~/.cache/jaxshap/xla``.
      min_compile_seconds: only programs that took at least this long to compile are written
        (JAX's ``jax_persistent_cache_min_compile_time_secs``); the default 0 writes all.

    Raises:
      ValueError: for a negative ``min_compile_seconds``.
    """
    if isinstance(min_compile_seconds, bool) or not isinstance(min_compile_seconds, (int, float)) or min_compile_seconds < 0:
        raise ValueError(f"`min_compile_seconds` must be a number of seconds >= 0; got {min_compile_seconds!r}.")
    if path is None:
        path = cache_dir()
    path = os.path.abspath(os.fspath(path))
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    try:  # a cache already initialised (by an earlier compilation) would ignore the new folder
        from jax._src import compilation_cache

        compilation_cache.reset_cache()
    except Exception:  # pragma: no cover - JAX keeps this private; best effort
        pass
    return path
