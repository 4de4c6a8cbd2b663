"""Model adapters: every model becomes a traceable function ``[..., M] -> [..., K]``.

A JAX-traceable callable is used as it is. Anything else (a scikit-learn ``predict``, a
NumPy function) is detected because it cannot be traced, and is evaluated on the host
through :func:`jax.pure_callback`, in batches, so that the rest of the pipeline stays
one compiled program. Gradients flow only through JAX models.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import logging
import threading
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from ._categorical import unwrap
from ._pytree import Static, avals, merge, split

# Rows per host call for non-JAX models; large enough to amortise Python overhead.
HOST_BATCH_ROWS = 16384


@jax.tree_util.register_pytree_node_class
class Model:
    """A model normalised to two-dimensional outputs, as a pytree.

    The user's model is split (see :mod:`jaxshap._core._pytree`) into its arrays, the pytree
    leaves (``params`` of ``partial(mlp, params)``, an equinox module's weights), and the rest,
    static; so an explainer holding a model is itself a pytree whose gradients reach the
    model's parameters, and two models that differ only in their arrays share a program.

    Attributes:
      leaves: the model's arrays (empty for a closure or a host model, which stay static).
      spec: the static rest of the model.
      n_features: ``M``.
      dtype: floating dtype of the inputs (and of the outputs handed back).
      n_outputs: ``K``, the number of outputs.
      single_output: whether the user's model returns ``[n]`` (results drop the K axis).
      is_host: whether the model runs on the host through a callback (not differentiable).
      bytes_per_row: estimated working memory per evaluated row, for chunking.
      output_names: names of the ``K`` outputs when the model tells them (the ``classes_`` of a
        scikit-learn classifier whose ``predict_proba`` is explained), else ``None``.
    """

    def __init__(self, leaves, spec, n_features, dtype, n_outputs, single_output, is_host, bytes_per_row,
                 output_names=None):
        self.leaves, self.spec = tuple(leaves), spec
        self.n_features, self.dtype = int(n_features), np.dtype(dtype)
        self.n_outputs, self.single_output = int(n_outputs), bool(single_output)
        self.is_host, self.bytes_per_row = bool(is_host), int(bytes_per_row)
        self.output_names = None if output_names is None else tuple(str(n) for n in output_names)

    @property
    def model(self) -> Callable:
        """The user's model, rebuilt around the (possibly traced) leaves."""
        return merge(self.leaves, self.spec)

    @property
    def fn(self) -> Callable[[jax.Array], jax.Array]:
        """Traceable function mapping ``[..., M]`` inputs to ``[..., K]`` outputs."""
        if self.is_host:
            return _host_fn(self.model, self.n_features, self.n_outputs, self.dtype, self.single_output)
        return _jax_fn(self.model, self.n_features, self.single_output, self.dtype)

    def evaluate_on_host(self, x: np.ndarray) -> np.ndarray:
        """A host model's outputs ``[..., K]`` on rows ``x [..., M]``, called from Python (not
        from a compiled program), in the model's dtype: see :func:`evaluate_on_host`."""
        out = evaluate_on_host(self.model, x, self.n_features, self.n_outputs, self.single_output)
        return out.astype(self.dtype, copy=False)

    def tree_flatten(self):
        meta = (self.spec, self.n_features, self.dtype, self.n_outputs, self.single_output, self.is_host,
                self.bytes_per_row, self.output_names)
        return self.leaves, meta

    @classmethod
    def tree_unflatten(cls, meta, leaves):
        return cls(leaves, *meta)


def _jax_fn(model: Callable, n_features: int, single: bool, dtype: Any) -> Callable:
    def fn(x):
        y = jnp.asarray(model(x.reshape(-1, n_features)))
        y = y.reshape(x.shape[:-1] + (-1,)) if not single else y.reshape(x.shape[:-1] + (1,))
        return y.astype(dtype)

    return fn


_LOCAL_X64 = contextvars.ContextVar("jaxshap_local_x64", default=False)


@contextlib.contextmanager
def local_x64() -> Iterator[None]:
    """``jax.enable_x64(True)`` for this thread, marked so that host models know it is local.

    JAX checks a host callback's outputs in the thread that runs it, where a thread-local x64
    setting does not hold; so under this context a host model hands back float32 outputs,
    widened to float64 in the program, and its inputs, the rows, travel as their float64 bits
    (uint32 pairs), which no thread narrows.
    """
    token = _LOCAL_X64.set(True)
    try:
        with jax.enable_x64(True):
            yield
    finally:
        _LOCAL_X64.reset(token)


def evaluate_on_host(model: Callable, x: np.ndarray, n_features: int, k: int, single: bool) -> np.ndarray:
    """A host model on rows ``x [..., M]``: outputs ``[..., K]``, in batches of :data:`HOST_BATCH_ROWS`.

    Raises:
      ValueError: when the model returns another shape than it did on the background.
    """
    tail = () if single else (k,)
    flat = np.asarray(x).reshape(-1, n_features)
    parts = []
    for i in range(0, flat.shape[0], HOST_BATCH_ROWS):
        rows_i = flat[i : i + HOST_BATCH_ROWS]
        y = np.asarray(model(rows_i))
        if y.shape != (rows_i.shape[0],) + tail:
            raise ValueError(
                f"`model` changed its output shape while being explained: for {rows_i.shape[0]} rows it "
                f"returned shape {y.shape}, but on the background it returned [n{''.join(', ' + str(t) for t in tail)}]. "
                "A model must return one row of the same outputs for every input row."
            )
        parts.append(y.reshape(-1, k))
    out = np.concatenate(parts, axis=0) if parts else np.zeros((0, k))
    return out.reshape(np.shape(x)[:-1] + (k,))


def _host_fn(model: Callable, n_features: int, k: int, dtype: Any, single: bool) -> Callable:
    wide = np.dtype(dtype)
    local = wide == np.float64 and _LOCAL_X64.get()
    if local:
        dtype = np.float32  # handed back narrow, widened in the program (see local_x64)

    def host_call(x: np.ndarray) -> np.ndarray:
        try:
            x = np.asarray(x)
            if local:  # the rows travel as their float64 bits (see fn)
                x = np.ascontiguousarray(x).view(np.float64).reshape(x.shape[:-1])
            return evaluate_on_host(model, x, n_features, k, single).astype(dtype)
        except BaseException as err:
            _record(err)
            raise

    def fn(x):
        shape = jax.ShapeDtypeStruct(x.shape[:-1] + (k,), dtype)
        if local:
            # The callback may run on a thread where the local x64 mode does not hold, and JAX would
            # then hand it the rows cut to float32; their bits as uint32 pairs arrive whole.
            x = jax.lax.bitcast_convert_type(x, jnp.uint32)
        return jax.pure_callback(host_call, shape, x, vmap_method="expand_dims").astype(wide)

    return fn


# --- a host model's own exceptions, surfaced instead of XLA's "INTERNAL" error ----------------
_ERRORS: list[BaseException] = []
_ERRORS_LOCK = threading.Lock()
_ACTIVE = [0]  # model_errors contexts open, in any thread


def _record(err: BaseException) -> None:
    with _ERRORS_LOCK:
        _ERRORS.append(err)


class _ReraisedHere(logging.Filter):
    """Drops JAX's log of a host model's exception ("jax.pure_callback failed" and its traceback)
    while :func:`model_errors` is open: that context raises the same exception itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        with _ERRORS_LOCK:
            return not (_ACTIVE[0] and any(e is err for e in _ERRORS))


logging.getLogger("jax._src.callback").addFilter(_ReraisedHere())


@contextlib.contextmanager
def model_errors() -> Iterator[None]:
    """Re-raise a host model's own exception when it fails inside a compiled program.

    A NumPy model runs through :func:`jax.pure_callback`; when it raises, XLA reports an
    ``INTERNAL`` runtime error whose message buries the model's. Inside this context the
    model's exception (its type, message and traceback) is raised instead, chained to nothing,
    and JAX's log of it (a second traceback on stderr) is dropped.
    """
    with _ERRORS_LOCK:
        start = len(_ERRORS)
        _ACTIVE[0] += 1
    try:
        yield
    except Exception as err:
        with _ERRORS_LOCK:
            new = _ERRORS[start:]
            del _ERRORS[start:]
        if new and not any(e is err for e in new):
            raise new[0] from None
        raise
    finally:
        with _ERRORS_LOCK:
            del _ERRORS[start:]
            _ACTIVE[0] -= 1


def _owner(model: Callable) -> Any:
    """The object a bound method belongs to (``clf`` for ``clf.predict_proba``, also inside a
    :class:`~jaxshap._core._categorical.FrameModel`), else the model."""
    model = unwrap(model)
    return getattr(model, "__self__", model)


def check_fitted_width(model: Callable, n_features: int) -> None:
    """Raise when a fitted model (``n_features_in_``, as scikit-learn's) expects another width.

    Raises:
      ValueError: naming the background's width and the model's.
    """
    expected = getattr(_owner(model), "n_features_in_", None)
    if isinstance(expected, (int, np.integer)) and int(expected) != n_features:
        raise ValueError(
            f"`background` has {n_features} columns but the model ({type(_owner(model)).__name__}) was fitted "
            f"on {int(expected)} features; pass background rows with the model's {int(expected)} columns, "
            "in the order it was trained on."
        )


def declared_output_names(model: Callable, n_outputs: int) -> tuple[str, ...] | None:
    """``classes_`` of the model's owner as output names, when there is one class per output."""
    classes = getattr(_owner(model), "classes_", None)
    if classes is None or n_outputs < 2:
        return None
    try:
        names = tuple(str(c) for c in list(classes))
    except TypeError:
        return None
    return names if len(names) == n_outputs else None


def _output_tail(shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    if len(shape) == 0 or shape[0] != n or len(shape) > 2:
        raise ValueError(
            f"`model` must map an [n, M] array to shape [n] or [n, K]; for n={n} it returned shape "
            f"{tuple(shape)}. Wrap it so that it returns one row of outputs per input row."
        )
    return tuple(shape[1:])


_PROBES: "collections.OrderedDict[Any, tuple]" = collections.OrderedDict()
_PROBE_CACHE_SIZE = 256


MATERIALISED = frozenset({
    "dot_general", "conv_general_dilated", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
    "reduce_and", "reduce_or", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin",
    "cumlogsumexp", "sort", "gather", "scatter", "scatter-add", "scatter_add", "transpose", "top_k",
})
"""Primitives whose results XLA writes to memory; elementwise chains fuse into their consumers."""


def _values_bytes(jaxpr: Any) -> int:
    """Bytes of the values a jaxpr writes to memory (those of :data:`MATERIALISED` primitives),
    inside the jaxprs of its equations (``pjit``, ``custom_jvp_call``, a ``scan``'s body) too."""
    total = 0
    for eqn in jaxpr.eqns:
        for var in eqn.outvars if eqn.primitive.name in MATERIALISED else ():
            shape, dtype = getattr(var.aval, "shape", None), getattr(var.aval, "dtype", None)
            if shape is not None and dtype is not None:
                total += int(np.prod(shape)) * np.dtype(dtype).itemsize
        for param in eqn.params.values():
            for inner in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's Jaxpr
                if hasattr(inner, "eqns"):
                    total += _values_bytes(inner)
    return total


def _probe(dynamic: tuple, spec: tuple, n_features: int, dtype: Any):
    """``(output shape on 2 rows, bytes per row)`` of a JAX model, or the error that says it
    cannot be traced (a host model).

    Traced abstractly from the leaves' shapes (so tracers in the leaves do not matter) and
    memoised on the model's static part and leaf shapes: building a second explainer on the same
    model, or one per step of a training loop, neither re-traces nor compiles the model. The
    bytes per row are the row's input and the values the model writes to memory for one more
    row (:func:`_values_bytes` of its jaxpr on 2 rows less on 1): the working set the chunk
    planner keeps in cache. (XLA's own account of a compiled model counts a fused value as
    nothing, so an attention layer fused into one kernel read as its inputs alone, and its
    chunks fell far out of cache.)
    """
    cache_key = (spec, avals(dynamic), n_features, np.dtype(dtype).str)
    if cache_key in _PROBES:
        _PROBES.move_to_end(cache_key)
        return _PROBES[cache_key]
    leaves = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in dynamic]
    call = lambda leaves, x: merge(leaves, spec)(x)
    rows = lambda n: jax.ShapeDtypeStruct((n, n_features), dtype)
    try:
        two = jax.make_jaxpr(call, return_shape=True)(leaves, rows(2))
        out = two[1]
        if not isinstance(out, jax.ShapeDtypeStruct):
            raise TypeError(f"the model returned {type(out).__name__}, not one array")
        one = jax.make_jaxpr(call)(leaves, rows(1))
    except Exception as err:  # not JAX-traceable: evaluated on the host
        result = err
    else:
        grown = _values_bytes(two[0].jaxpr) - _values_bytes(one.jaxpr)
        result = (tuple(out.shape), max(grown, 1) + n_features * np.dtype(dtype).itemsize)
    _PROBES[cache_key] = result
    if len(_PROBES) > _PROBE_CACHE_SIZE:
        _PROBES.popitem(last=False)
    return result


def is_host_model(model: Any, n_features: int) -> bool:
    """Whether ``model`` is evaluated on the host (a NumPy callable that JAX cannot trace): the
    same test :func:`wrap_model` makes, from the same memoised probe."""
    if not callable(model):
        return False
    dynamic, spec = split(model)
    return isinstance(_probe(dynamic, spec, n_features, np.float32), Exception)


def wrap_model(model: Callable, n_features: int, dtype: Any, probe: np.ndarray | jax.Array) -> Model:
    """Detect how to call ``model`` and return a :class:`Model`.

    Args:
      model: a callable ``[n, M] -> [n]`` or ``[n, K]``, JAX-traceable or plain NumPy.
      n_features: ``M``.
      dtype: floating dtype of the inputs (and of the outputs handed back).
      probe: a few valid input rows (the background) used to detect a host model's output shape.

    Raises:
      TypeError: when ``model`` is not callable or cannot be evaluated either way.
      ValueError: when the model's output does not have one row per input row.
    """
    if not callable(model):
        hint = ""
        if hasattr(model, "predict_proba") or hasattr(model, "predict"):
            hint = " Pass its prediction function, such as model.predict or model.predict_proba."
        raise TypeError(
            f"`model` must be callable ([n, M] -> [n] or [n, K]); got {type(model).__name__}.{hint}"
        )
    check_fitted_width(model, n_features)
    itemsize = jnp.dtype(dtype).itemsize
    dynamic, spec = split(model)
    probed = _probe(dynamic, spec, n_features, dtype)
    if not isinstance(probed, Exception):
        shape, per_row = probed
        tail = _output_tail(shape, 2)
        single = len(tail) == 0
        k = 1 if single else tail[0]
        return Model(dynamic, spec, n_features, dtype, k, single, False, per_row, declared_output_names(model, k))
    trace_error = probed

    host = probe if isinstance(probe, np.ndarray) else jax.device_get(probe)  # sliced here, nothing compiles
    rows = np.asarray(host[:2], dtype)
    try:
        y = np.asarray(model(rows))
    except Exception as err:
        raise TypeError(
            f"`model` could not be evaluated: calling it on the background's first rows (a NumPy array of "
            f"shape {rows.shape}) raised {type(err).__name__}: {err}. Check that the background has the "
            "columns the model expects, in its order. (The model is not JAX-traceable either: "
            f"{type(trace_error).__name__}: {trace_error})"
        ) from err
    tail = _output_tail(y.shape, rows.shape[0])
    single = len(tail) == 0
    k = 1 if single else tail[0]
    # a host model stays whole and static: its arrays are NumPy's business, not JAX's
    return Model((), (None, jax.tree_util.tree_structure(0), (Static(model),)), n_features, dtype, k, single, True,
                 4 * itemsize * (n_features + k), declared_output_names(model, k))
