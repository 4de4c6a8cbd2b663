"""A host (NumPy) model evaluated between two compiled programs instead of inside one.

A model that JAX cannot trace (a scikit-learn ``predict``, any NumPy function) can run inside a
compiled program through :func:`jax.pure_callback`, but such a program holds a pointer to a
Python function and cannot be kept across processes, so every fresh process compiles it again.
When the estimator and the masker allow it, a block of rows is explained in three steps instead:

1. :func:`inputs_program` (compiled) draws each row's coalitions and builds the rows the model
   must see, ``[r, C, E, M]`` (``E`` evaluations per coalition: background rows or draws);
2. the host evaluates the model on them, in batches (:meth:`jaxshap._core._model.Model.evaluate_on_host`);
3. :func:`values_program` (compiled) draws the same coalitions again, turns the outputs into
   coalition values through the masker and the link, and runs the estimator on them.

Neither program calls Python, so both are kept by the program store
(:func:`jaxshap._core._platform.cached_jit`) and a second process loads them instead of
compiling.

**How one estimator serves both programs.** An explainer maps a per-row body
``body(value_fn, x, *rest)`` over rows with :func:`map_rows`, and the body calls ``value_fn``
(coalitions ``[C, M]`` to values ``[C, K]``) once. Normally ``value_fn`` evaluates the model
through the masker. In the first program it raises, carrying the masked rows the masker built
and the coalitions, and :func:`map_rows` returns those at once; in the second it reads the
outputs the host computed. This needs a masker whose ``coalition_values`` calls the model once
at its top level (:attr:`jaxshap.maskers.Masker.calls_model_once`); other explainers and maskers
keep the callback. The second program checks that it drew exactly the coalitions of the first
and the call raises if not, so values are never paired with the wrong coalitions.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from .._core._chunking import ProgressBar, bucket_rows, map_chunks
from .._core._inputs import is_traced
from .._core._platform import cached_jit, untied
from ._program import take_block


@dataclasses.dataclass
class _Stage:
    """What :func:`map_rows` does while one of the two programs is traced."""

    outputs: Any = None  # None while collecting the model's inputs; the host's outputs after
    masks: Any = None
    checks: list = dataclasses.field(default_factory=list)


_STAGE: contextvars.ContextVar[_Stage | None] = contextvars.ContextVar("jaxshap_host_stage", default=None)


class _Inputs(Exception):
    """Raised by the model stand-in of the first program: the rows the masker built."""

    def __init__(self, rows: jax.Array):
        super().__init__("model inputs")
        self.rows = rows


class _RowInputs(Exception):
    """Raised by the first program's ``value_fn``: one row's masked rows and coalitions."""

    def __init__(self, rows: jax.Array, masks: jax.Array):
        super().__init__("row inputs")
        self.rows, self.masks = rows, masks


class _BlockInputs(Exception):
    """Raised by :func:`map_rows` in the first program: every row's masked rows and coalitions."""

    def __init__(self, value: Any):
        super().__init__("block inputs")
        self.value = value


def _raise_inputs(rows: jax.Array) -> jax.Array:
    raise _Inputs(rows)


def _collecting_value_fn(core: Any, x: jax.Array) -> Callable[[jax.Array], jax.Array]:
    def value_fn(masks):
        try:
            core._game(x, _raise_inputs, masks.shape[0])(masks)
        except _Inputs as got:
            raise _RowInputs(got.rows, masks) from None
        raise RuntimeError(f"{type(core.masker).__name__}.coalition_values did not call the model.")

    return value_fn


def _replaying_value_fn(core: Any, x: jax.Array, outputs: jax.Array, drawn: jax.Array, same: list) -> Callable:
    k, dtype = core.model.n_outputs, core.masker.dtype

    def model(rows):
        return outputs.reshape(rows.shape[:-1] + (k,)).astype(dtype)

    def value_fn(masks):
        if same:
            raise RuntimeError("an estimator evaluated its game twice in one row; it cannot run a host model in stages.")
        same.append(jnp.array_equal(masks, drawn))
        return core._game(x, model, masks.shape[0])(masks)

    return value_fn


def map_rows(core: Any, body: Callable, X: jax.Array, rest: tuple, rows_per_chunk: int, coalitions_per_chunk: Any,
             n_valid: Any = None) -> Any:
    """``body(value_fn, x, *rest_row)`` for every row of ``X`` (vmapped, in chunks; traced).

    ``value_fn`` is row ``x``'s game, evaluated ``coalitions_per_chunk`` coalitions at a time
    (:meth:`jaxshap._engine._explainer.ModelAgnosticExplainer._game`), except while :func:`inputs_program` or
    :func:`values_program` is traced (see the module docstring). ``body`` must call it once.
    """
    stage = _STAGE.get()
    if stage is None:
        def row(x, *r):
            return body(core._game(x, core.model.fn, coalitions_per_chunk), x, *r)

        return map_chunks(lambda args: jax.vmap(row)(*args), (X, *rest), rows_per_chunk, n_valid)
    if stage.outputs is None:
        def collect(x, *r):
            try:
                body(_collecting_value_fn(core, x), x, *r)
            except _RowInputs as got:
                return got.rows, got.masks
            raise RuntimeError("the estimator evaluated no coalition.")

        raise _BlockInputs(jax.vmap(collect)(X, *rest))

    def replay(x, outputs, drawn, *r):
        same = []
        out = body(_replaying_value_fn(core, x, outputs, drawn, same), x, *r)
        return out, same[0]

    out, same = jax.vmap(replay)(X, stage.outputs, stage.masks, *rest)
    stage.checks.append(jnp.all(same))
    return out


@contextlib.contextmanager
def _staged(stage: _Stage) -> Iterator[_Stage]:
    token = _STAGE.set(stage)
    try:
        yield stage
    finally:
        _STAGE.reset(token)


def _index(X: jax.Array, first: Any) -> jax.Array:
    return first + jnp.arange(X.shape[0], dtype=jnp.asarray(first).dtype)


@cached_jit(static_argnames=("coalitions",))
def inputs_program(core: Any, X: jax.Array, key: jax.Array, first: Any, coalitions: int) -> Any:
    """``(rows [r, C, E, M], masks [r, C, M])``: what the model must evaluate for rows ``X [r, M]``
    (global rows ``first, first + 1, ...``), and the coalitions they come from."""
    with _staged(_Stage()), untied():  # the estimator's own factorisations are dead code here
        try:
            core._explain_keyed(X, key, _index(X, first), X.shape[0], coalitions, None)
        except _BlockInputs as got:
            return got.value
    raise RuntimeError(f"{type(core).__name__} does not map its rows with map_rows.")


@cached_jit(static_argnames=("coalitions",))
def values_program(core: Any, X: jax.Array, outputs: jax.Array, masks: jax.Array, key: jax.Array, first: Any,
                   coalitions: int) -> Any:
    """The explainer's per-row results for rows ``X`` from the model's ``outputs [r, C, E, K]`` on
    the rows :func:`inputs_program` built, and whether the coalitions drawn are ``masks``."""
    with _staged(_Stage(outputs, masks)) as stage:
        out = core._explain_keyed(X, key, _index(X, first), X.shape[0], coalitions, None)
    return out, jnp.all(jnp.stack(stage.checks))


BLOCK_EVALS = 2**20
"""Model evaluations per block (a few of the host model's batches): blocks of this size keep the
masked rows in memory small and the padding of a last short block cheap, and cost the host
loop a few milliseconds each."""


def staged_rows(core: Any, X: Any, key: Any, devices: Any) -> int:
    """Rows per block for explaining ``X`` in stages, or 0 when the callback must be kept.

    Stages apply to a host model of an explainer that allows them (``stages_host_model``) and
    whose masker calls it once per coalition batch; the rows, key and explainer must be concrete
    (not inside the user's ``jax.jit``) and on one device, and one row's model inputs and outputs
    must fit the memory budget (so an explainer's ``_with_shared_work`` only sees a concrete key).
    """
    if not (core.model.is_host and core.stages_host_model and core.masker.calls_model_once) or devices is not None:
        return 0
    if any(is_traced(a) for a in jax.tree_util.tree_leaves((X, key, core))):
        return 0
    if len(X.devices()) != 1:
        return 0
    itemsize = np.dtype(core.masker.dtype).itemsize
    evals = core._evals_per_row()
    per_row = evals * itemsize * (core.masker.n_columns + 2 * core.model.n_outputs)
    per_row += core._working_set_per_row() + core._solve_set_per_row()
    if per_row > core.memory_budget:
        return 0
    rows = max(1, min(BLOCK_EVALS // max(evals, 1), core.memory_budget // max(per_row, 1)))
    return bucket_rows(X.shape[0], rows, least_rows=1)[0]


def run_staged(core: Any, X: jax.Array, key: jax.Array, offset: int, rows: int, bar: ProgressBar | None) -> Any:
    """Explain ``X [n, M]`` (global rows ``offset, ...``) in blocks of ``rows``, the host model
    evaluated between :func:`inputs_program` and :func:`values_program`.

    On a first call both programs compile at once, in two threads, and the second goes on
    compiling while the host evaluates the model on the first block.
    """
    n, coalitions = X.shape[0], core._coalitions_per_row()
    k, dtype = core.model.n_outputs, core.masker.dtype
    parts = []
    for begin in range(0, n, rows):
        start = min(begin, max(n - rows, 0))  # a last block shifted back to end at row n
        block, valid = take_block(X, start, rows)
        first = np.asarray(offset + start, np.int32)
        shapes = inputs_program.prepare(core, block, key, first, coalitions=coalitions)
        if shapes is not None:  # compiling: start the second program too
            rows_shape, masks_shape = shapes
            values_program.prepare(core, block, np.zeros(rows_shape.shape[:-1] + (k,), dtype),
                                   np.zeros(masks_shape.shape, bool), key, first, coalitions=coalitions)
        inputs, masks = inputs_program(core, block, key, first, coalitions=coalitions)
        inputs, masks = np.asarray(inputs), np.asarray(masks)
        outputs = np.zeros(inputs.shape[:-1] + (k,), dtype)
        keep = begin - start  # rows the previous block explained: not evaluated again
        outputs[keep:valid] = core.model.evaluate_on_host(inputs[keep:valid])
        out, same = values_program(core, block, outputs, masks, key, first, coalitions=coalitions)
        if not bool(same):
            raise RuntimeError(
                "jaxshap drew different coalitions in the two programs that explain a host model, so it cannot "
                "pair the model's outputs with them; please report this as a bug."
            )
        parts.append(jax.tree_util.tree_map(lambda a: np.asarray(a)[keep:valid], out))
        if bar is not None:
            bar.update(valid - keep)
    if len(parts) == 1:
        out = parts[0]
    else:
        out = jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=0), *parts)
    return jax.tree_util.tree_map(jax.device_put, out)  # (jnp.asarray would compile a `stage` per shape)
