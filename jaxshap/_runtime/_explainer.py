"""What every model-agnostic explainer shares: input handling, chunking, devices, results.

An explainer binds a model and a masker once; calling it validates the rows, plans chunks
under the memory budget and runs one compiled program that maps a per-row estimator over
the rows (``vmap`` inside each chunk, a scan across chunks). Subclasses only say how many
coalitions a row needs and which estimator kernel turns coalition values into attributions.

Scale (see :meth:`Explainer.__call__` and :meth:`Explainer.explain_batches`):

* memory: the working set is one chunk, sized from ``memory_budget``; only the inputs and the
  results (``[n, M]``) grow with the number of rows;
* devices: rows sharded over a mesh (``NamedSharding`` on the row axis) are explained where
  they lie, with :func:`jax.shard_map`; ``devices=`` shards them on request; a mesh that spans
  several processes (``jax.distributed``) explains a data set across hosts;
* host-level blocks: with a progress bar, or when streaming batches, the compiled program runs
  on successive blocks of rows of one fixed shape (compiled once).

Row ``i`` (counted from the first row of the call or of the stream) is always explained with
the key ``fold_in(key, i)``, so results do not depend on chunks, blocks, batches or devices
(beyond float rounding: differently shaped batches may sum in a different order).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from ._chunking import DEFAULT_MEMORY_BUDGET, map_chunks, plan_blocks, plan_chunks
from .._explanation import Explanation
from ._inputs import as_key, as_matrix, check_finite, check_n_features, column_names, is_traced, resolve_feature_names
from ._inputs import align_columns, check_finite_rows, is_sparse
from ._links import check_link_outputs, link_function, resolve_link
from ._model import model_errors, wrap_model
from ._shap_api import ShapAPI
from ._progress import ProgressBar, wants_progress
from ._sharding import row_mesh
from ..maskers import Independent

ValueFn = Callable[[jax.Array], jax.Array]


def as_masker(masker: Any) -> Any:
    """A masker as given, or ``Independent(masker)`` for a background array or DataFrame."""
    if hasattr(masker, "coalition_values"):
        return masker
    if masker is None:
        raise ValueError(
            "`background` is required: pass background rows [B, M] (for example 100 training rows) "
            "or a masker such as jaxshap.maskers.Independent(data)."
        )
    return Independent(masker, max_samples=None)


class Explainer(ShapAPI):
    """Base class of the model-agnostic explainers (not used directly).

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable, or a plain NumPy callable
        such as a scikit-learn ``predict`` (evaluated on the host, in batches).
      background: background rows ``[B, M]`` (array or DataFrame), used through
        :class:`jaxshap.maskers.Independent`, or a masker.
      feature_names: optional names of the ``M`` features; by default the columns of a
        DataFrame background or of the explained rows, else ``Feature j``.
      memory_budget: bytes of working memory that one chunk of model evaluations may use
        (default :data:`jaxshap.DEFAULT_MEMORY_BUDGET`, 512 MiB). The rows' coalitions are
        evaluated in chunks of whole rows (or, when one row does not fit, of coalitions) whose
        inputs, model activations and outputs fit the budget, so memory grows with the chunk
        and not with the number of rows; only the inputs and results (``[n, M]``) are held in
        full. On a CPU chunks are further capped at the cache-friendly
        :data:`jaxshap._runtime._chunking.CPU_CHUNK_BYTES`. Results do not depend on the budget.
      link: ``"identity"`` (default) or ``"logit"``: explain ``logit v(S)``, the log-odds of a
        probability output's coalition values, as shap's ``link="logit"``; the values then add up
        to ``logit f(x) - logit E[f(X)]``. Probabilities of exactly 0 or 1 are clipped to the
        nearest representable ones (see :func:`jaxshap._runtime._links.logit`).
    """

    def __init__(
        self,
        model: Callable,
        background: Any,
        *,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        link: Any = "identity",
    ):
        self.link = resolve_link(link)
        self.masker = as_masker(background)
        if not isinstance(memory_budget, (int, np.integer)) or memory_budget <= 0:
            raise ValueError(f"`memory_budget` must be a positive number of bytes; got {memory_budget!r}.")
        self.memory_budget = int(memory_budget)
        self.n_features = self.masker.n_features
        self._check_n_features(self.n_features)
        self._user_model = model
        self.model = wrap_model(model, self.n_features, self.masker.dtype, self.masker.probe_rows)
        if self.link != "identity":
            with model_errors():
                check_link_outputs(self.link, self.model.fn(jnp.asarray(self.masker.probe_rows[:256])))
        self._names = feature_names
        self._expected_value = None
        self._block = jax.jit(self._explain_block, static_argnums=(5, 6, 7, 8))

    # --- shap's explainer surface (pickling, expected_value) ------------------------------------
    def __getstate__(self) -> dict:
        """Pickle the user's model and the masker; the wrapped model and compiled code are rebuilt."""
        state = self.__dict__.copy()
        state.pop("model", None)
        state.pop("_block", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.model = wrap_model(self._user_model, self.n_features, self.masker.dtype, self.masker.probe_rows)
        self._block = jax.jit(self._explain_block, static_argnums=(5, 6, 7, 8))

    @property
    def expected_value(self) -> Any:
        """The base value ``link(v(empty))``, ``E[f(X)]`` over the masker: a NumPy scalar for a
        single-output model, else ``[K]``, as shap's ``explainer.expected_value``."""
        if self._expected_value is None:
            empty = jnp.zeros((1, self.n_features), bool)
            with model_errors():
                v = self.masker.coalition_values(self.model.fn, jnp.asarray(self.masker.probe_rows[0]), empty)
                v = np.asarray(link_function(self.link)(v))[0]
            self._expected_value = v[0] if self.model.single_output else v
        return self._expected_value

    def __repr__(self) -> str:
        chosen = getattr(self, "chosen_by_auto", None)
        note = f", chosen by jaxshap.Explainer: {chosen}" if chosen else ""
        return (
            f"{type(self).__name__}(features={self.n_features}, outputs={self.model.n_outputs}, "
            f"masker={self.masker!r}, link={self.link!r}{note})"
        )

    # --- what subclasses define ------------------------------------------------------------
    def _check_n_features(self, n_features: int) -> None:
        """Raise for feature counts this estimator cannot handle."""

    def _coalitions_per_row(self) -> int:
        raise NotImplementedError

    def _estimate(self, key: jax.Array, value_fn: ValueFn) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """Return ``(phi [M, K], base [K], stderr [M, K] or None)`` for one row."""
        raise NotImplementedError

    # --- shared machinery -------------------------------------------------------------------
    def _explain_local(self, masker, X, keys, rows_per_chunk, coalitions_per_chunk):
        """Explain rows ``X [b, M]`` with per-row keys ``keys [b]``, chunk by chunk."""
        f = self.model.fn

        link = link_function(self.link)

        def one_row(k, x):
            def value_fn(masks):
                return link(map_chunks(lambda m: masker.coalition_values(f, x, m), masks, coalitions_per_chunk))

            return self._estimate(k, value_fn)

        return map_chunks(lambda args: jax.vmap(one_row)(*args), (keys, X), rows_per_chunk)

    def _explain_rows(self, masker, X, key, index, rows_per_chunk, coalitions_per_chunk):
        """Explain rows ``X [b, M]``, global rows ``index [b]``, under the call's ``key``.

        The hook for work shared by every row of a call: the default gives row ``i`` the key
        ``fold_in(key, i)`` and explains rows independently (:meth:`_explain_local`); an
        explainer that draws one design for all rows (``KernelExplainer``'s shared coalitions)
        overrides it and derives that design from ``key`` alone, once per block.
        """
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(index)
        return self._explain_local(masker, X, keys, rows_per_chunk, coalitions_per_chunk)

    def _explain_block(self, masker, X, key, offset, start, block_rows, rows_per_chunk, coalitions_per_chunk, mesh):
        """One block of rows: ``X[start : start + block_rows]`` (per device shard, on a mesh).

        Row ``r`` of the device's shard is global row ``offset + shard * shard_rows + r`` and
        uses the key ``fold_in(key, offset + shard * shard_rows + r)``. ``offset`` and ``start``
        are traced, so every block of one call (and every equal batch of a stream) reuses one
        compiled program.
        """

        def local(masker, X, key, offset, start):
            first = offset + start
            if mesh is not None:
                first = first + jax.lax.axis_index(mesh.axes) * X.shape[0]
            rows = X if block_rows == X.shape[0] else jax.lax.dynamic_slice_in_dim(X, start, block_rows)
            index = first + jnp.arange(block_rows, dtype=jnp.asarray(first).dtype)
            return self._explain_rows(masker, rows, key, index, rows_per_chunk, coalitions_per_chunk)

        if mesh is None:
            return local(masker, X, key, offset, start)
        rows_spec, rep = PartitionSpec(mesh.axes), PartitionSpec()
        return jax.shard_map(
            local, mesh=mesh.mesh, in_specs=(rep, rows_spec, rep, rep, rep), out_specs=rows_spec, check_vma=False
        )(masker, X, key, offset, start)

    def _plan(self, n_rows: int) -> tuple[int, int]:
        """``(rows_per_chunk, coalitions_per_chunk)`` for ``n_rows`` rows under the memory budget."""
        return plan_chunks(
            n_rows,
            self._coalitions_per_row(),
            self.masker.evals_per_coalition,
            self.model.bytes_per_row + jnp.dtype(self.masker.dtype).itemsize * self.n_features,
            self.memory_budget,
        )

    def _validate(self, X: Any) -> jax.Array:
        # NaN in X is passed to the model, as shap does (XGBoost and others handle missing values);
        # a model output that is NaN or inf is reported by _wrap, naming the rows.
        X = align_columns(X, self.masker.feature_names, "X")
        X = as_matrix(X, "X", dtype=self.masker.dtype)
        check_n_features(X, self.n_features, "X", "the background")
        return X

    def _wrap(self, phi, base, stderr, X, names) -> Explanation:
        if self.model.single_output:
            phi, base = phi[..., 0], base[..., 0]
            stderr = None if stderr is None else stderr[..., 0]
        if isinstance(X, jax.Array) and not is_traced(X) and X.is_fully_addressable:
            check_finite_rows(base, "X", "the model's output on the background (the base value)")
            check_finite_rows(phi, "X", "the model's output (and so its SHAP values)", X)
        feature_names = resolve_feature_names(self._names, self.n_features, self.masker.feature_names, names)
        output_names = None if self.model.single_output else self.model.output_names
        if output_names is None and not self.model.single_output:
            output_names = [f"Output {k}" for k in range(self.model.n_outputs)]
        return Explanation(phi, base, X, stderr, feature_names, output_names)

    def _empty(self, names) -> Explanation:
        """The explanation of zero rows: arrays with a leading axis of length 0."""
        dtype = self.masker.dtype
        k = () if self.model.single_output else (self.model.n_outputs,)
        phi = jnp.zeros((0, self.n_features) + k, dtype)
        X = jnp.zeros((0, self.n_features), dtype)
        k_out = self.model.n_outputs
        probe = jax.eval_shape(lambda key: self._estimate(key, lambda m: jnp.zeros((m.shape[0], k_out), dtype)), jax.random.key(0))
        stderr = None if probe[2] is None else phi
        feature_names = resolve_feature_names(self._names, self.n_features, self.masker.feature_names, names)
        output_names = None if self.model.single_output else self.model.output_names
        if output_names is None and not self.model.single_output:
            output_names = [f"Output {k}" for k in range(self.model.n_outputs)]
        return Explanation(phi, jnp.zeros((0,) + k, dtype), X, stderr, feature_names, output_names)

    def _call_sparse(self, X: Any, key: Any, progress: Any, devices: Any) -> Explanation:
        """Explain ``scipy.sparse`` rows block by block, densifying one block at a time."""
        if X.shape[1] != self.n_features:
            raise ValueError(
                f"`X` has {X.shape[1]} features but the background has {self.n_features}; "
                f"pass rows with the same {self.n_features} columns, in the same order."
            )
        X = X.tocsr()
        rows, _ = self._plan(max(int(X.shape[0]), 1))
        block = max(1, plan_blocks(int(X.shape[0]), rows, self._coalitions_per_row() * self.masker.evals_per_coalition))
        parts = list(self.explain_batches((X[i : i + block] for i in range(0, X.shape[0], block)), key, progress=progress, devices=devices))
        cat = lambda *a: None if a[0] is None else jnp.concatenate(a, axis=0)
        first = parts[0]
        return Explanation(
            cat(*[p.values for p in parts]),
            cat(*[p.base_values for p in parts]),
            cat(*[p.data for p in parts]),
            cat(*[p.stderr for p in parts]),
            first.feature_names,
            first.output_names,
        )

    def _run(self, X: jax.Array, key: jax.Array, offset: int, devices: Any, bar: ProgressBar | None, blocked: bool):
        """Explain validated rows ``X``, as global rows ``offset, offset + 1, ...``.

        With ``blocked`` the compiled block program is called from Python on successive blocks
        of one shape (the last one shifted back to end at the last row, so no block is ragged),
        each dispatched before the previous one is waited for; else one call does every row.
        """
        n = X.shape[0]
        mesh = row_mesh(X, devices)
        shards = 1 if mesh is None else mesh.size
        n_pad = -(-n // shards) * shards
        if n_pad != n:  # shard_map needs equal shards: pad with copies of the first row, dropped below
            X_in = jnp.concatenate([X, jnp.broadcast_to(X[:1], (n_pad - n, X.shape[1]))], axis=0)
        else:
            X_in = X
        if devices is not None and not is_traced(X_in):
            place = jax.local_devices()[0] if isinstance(devices, str) else list(devices)[0]
            if mesh is not None:
                place = NamedSharding(mesh.mesh, PartitionSpec(mesh.axes))
            X_in = jax.device_put(X_in, place)
        local_rows = n_pad // shards
        rows, coalitions = self._plan(local_rows)
        if not blocked:
            return self._trim(self._block(self.masker, X_in, key, offset, 0, local_rows, rows, coalitions, mesh), n)
        evals_per_row = self._coalitions_per_row() * self.masker.evals_per_coalition
        block = plan_blocks(local_rows, rows, evals_per_row)
        rows, coalitions = self._plan(block)
        starts = [min(s, local_rows - block) for s in range(0, local_rows, block)]
        parts, pending = [], None
        for i, start in enumerate(starts):
            out = self._block(self.masker, X_in, key, offset, start, block, rows, coalitions, mesh)
            keep = i * block - start  # rows of a shifted last block that earlier blocks already did
            if pending is not None:
                self._wait(pending, bar)
            pending = (out, (block - keep) * shards)
            if shards == 1:
                parts.append(jax.tree_util.tree_map(lambda a: a[keep:], out))
            else:
                parts.append(
                    jax.tree_util.tree_map(lambda a: a.reshape((shards, block) + a.shape[1:])[:, keep:], out)
                )
        self._wait(pending, bar)
        if len(parts) == 1:
            out = parts[0]
        else:
            axis = 0 if shards == 1 else 1
            out = jax.tree_util.tree_map(lambda *a: jnp.concatenate(a, axis=axis), *parts)
        if shards > 1:
            out = jax.tree_util.tree_map(lambda a: a.reshape((n_pad,) + a.shape[2:]), out)
        return self._trim(out, n)

    @staticmethod
    def _trim(out, n):
        return jax.tree_util.tree_map(lambda a: a if a.shape[0] == n else a[:n], out)

    @staticmethod
    def _wait(pending, bar):
        out, rows = pending
        if bar is not None:
            jax.block_until_ready(out)
            bar.update(rows)

    def __call__(self, X: Any, key: Any = None, *, progress: bool | None = None, devices: Any = None) -> Explanation:
        """Explain the rows of ``X``.

        Args:
          X: rows to explain, ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted). A JAX
            array sharded over a mesh along its rows (``jax.device_put(X, NamedSharding(mesh,
            P("rows")))``) is explained where it lies: each device explains its own rows and the
            results come back sharded the same way. That mesh may span several processes
            (``jax.distributed``): see :meth:`explain_batches` and the README's "Explaining
            across hosts".
          key: PRNG key for sampling estimators; ``None`` means ``jax.random.key(0)``. Row ``i``
            uses ``fold_in(key, i)``, whatever the chunks, blocks or devices.
          progress: show a progress bar (rows done, rate, time left) on ``sys.stderr``; ``None``
            (the default) shows it only when ``sys.stderr`` is an interactive terminal. Never
            shown while JAX is tracing (inside ``jax.jit``, ``jax.grad``, ``jax.vmap``). With a
            bar the rows run as successive equal blocks of one compiled program.
          devices: ``None`` (default) runs where ``X`` lies; ``"local"`` shards the rows over
            all of this process's devices (``jax.local_devices()``); a sequence of devices
            shards them over those. Results equal the single-device ones.

        Returns:
          An :class:`Explanation` with ``values`` ``[n, M]`` (or ``[n, M, K]``).
        """
        key = as_key(key)
        if is_sparse(X) and getattr(X, "shape", (0,))[0] > 0:
            return self._call_sparse(X, key, progress, devices)
        X = align_columns(X, self.masker.feature_names, "X")
        names = column_names(X)
        X = self._validate(X)
        if X.shape[0] == 0:
            return self._empty(names)
        show = wants_progress(progress) and not is_traced(X)
        bar = ProgressBar(X.shape[0]) if show else None
        with model_errors():
            try:
                phi, base, stderr = self._run(X, key, 0, devices, bar, blocked=show)
            finally:
                if bar is not None:
                    bar.close()
            return self._wrap(phi, base, stderr, X, names)

    def explain_batches(
        self,
        batches: Any,
        key: Any = None,
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        devices: Any = None,
    ) -> Iterator[Explanation]:
        """Explain a stream of rows batch by batch, yielding one :class:`Explanation` per batch.

        Only one batch is in memory at a time, so a data set larger than memory (a
        ``numpy.memmap``, ``np.load(path, mmap_mode="r")``, or a generator reading files) can be
        explained with results written out as they come. Rows are numbered across the whole
        stream and row ``i`` uses ``fold_in(key, i)``, so the values do not depend on how the
        rows are cut into batches, and equal ``__call__`` on all rows at once (up to float
        rounding).

        Example (write the values of a memory-mapped data set to a memory-mapped result)::

            X = np.load("rows.npy", mmap_mode="r")                    # [n, M], not loaded
            out = np.lib.format.open_memmap("shap.npy", "w+", np.float32, X.shape)
            row = 0
            for expl in explainer.explain_batches(X, key=jax.random.key(0)):
                out[row : row + len(expl)] = np.asarray(expl.values)
                row += len(expl)
            out.flush()

        Args:
          batches: a 2-D array (NumPy, memory-mapped, JAX or a DataFrame), cut into batches of
            ``batch_size`` rows (the last batch is padded to the same shape, so one program is
            compiled); or any iterable of 2-D batches (each distinct batch shape compiles once).
          key: PRNG key for sampling estimators; ``None`` means ``jax.random.key(0)``.
          batch_size: rows per batch when ``batches`` is an array; by default a few chunks'
            worth of rows planned from ``memory_budget``.
          progress: progress bar over the rows, as in :meth:`__call__` (the total is known for an
            array or an iterable with ``len``, else only the count and rate are shown).
          devices: as in :meth:`__call__`: ``"local"`` or a sequence of devices shards each batch.

        Yields:
          One :class:`Explanation` per batch, in order (JAX arrays; ``np.asarray`` copies them out).
        """
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1
        ):
            raise ValueError(f"`batch_size` must be a positive number of rows; got {batch_size!r}.")
        key = as_key(key)
        show = wants_progress(progress)
        is_array = getattr(batches, "ndim", None) == 2 and hasattr(batches, "shape")
        if is_array:  # a DataFrame's columns are matched to the background's once, before it is cut
            batches = align_columns(batches, self.masker.feature_names, "X")
        if is_array:
            total = int(batches.shape[0])
        elif isinstance(batches, (list, tuple)):
            total = sum(as_rows(b) for b in batches)
        else:  # a generator: the number of rows is not known in advance
            total = None
        bar = ProgressBar(total) if show else None
        offset = 0
        try:
            for batch, n_real in self._batches(batches, is_array, batch_size):
                batch = align_columns(batch, self.masker.feature_names, "X")
                names = column_names(batch)
                X = self._validate(batch)
                if X.shape[0] == 0:
                    yield self._empty(names)
                    continue
                with model_errors():
                    phi, base, stderr = self._run(X, key, offset, devices, bar, blocked=True)
                    if n_real != X.shape[0]:
                        phi, base, X = phi[:n_real], base[:n_real], X[:n_real]
                        stderr = None if stderr is None else stderr[:n_real]
                    offset += n_real
                    out = self._wrap(phi, base, stderr, X, names)
                yield out
        finally:
            if bar is not None:
                bar.close()

    def _batches(self, batches: Any, is_array: bool, batch_size: int | None) -> Iterable[tuple[Any, int]]:
        """``(batch, real_rows)`` pairs; array batches are host slices padded to one shape."""
        if not is_array:
            for batch in batches:
                yield batch, as_rows(batch)
            return
        n = int(batches.shape[0])
        if batch_size is None:
            rows, _ = self._plan(n)
            batch_size = plan_blocks(n, rows, self._coalitions_per_row() * self.masker.evals_per_coalition)
        batch_size = min(batch_size, max(n, 1))
        frame = hasattr(batches, "iloc")
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            batch = batches.iloc[start:stop] if frame else batches[start:stop]
            if stop - start < batch_size and start > 0:  # pad the last batch: no new compilation
                names = column_names(batch)
                part = np.asarray(batch.to_numpy() if frame else (batch.toarray() if is_sparse(batch) else batch))
                pad = np.broadcast_to(part[:1], (batch_size - (stop - start),) + part.shape[1:])
                batch = _Named(np.concatenate([part, pad]), names) if names else np.concatenate([part, pad])
            yield batch, stop - start


def as_rows(batch: Any) -> int:
    """Number of rows of a batch (a single row ``[M]`` counts as one)."""
    if is_sparse(batch):
        return int(batch.shape[0])
    shape = np.shape(batch.to_numpy() if hasattr(batch, "to_numpy") else batch)
    return 1 if len(shape) == 1 else int(shape[0])


class _Named:
    """A padded DataFrame batch: the array plus the column names (duck-typed like a DataFrame)."""

    def __init__(self, array: np.ndarray, columns: list[str]):
        self._array, self.columns = array, columns

    def to_numpy(self) -> np.ndarray:
        return self._array
