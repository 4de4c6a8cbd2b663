"""Explain one data set across several processes (hosts) with JAX's multi-process runtime.

Every process runs this same program. ``jax.distributed.initialize`` joins them into one JAX
runtime whose ``jax.devices()`` lists every process's devices; a mesh over all of them shards the
rows, each process supplies (and explains) only its own rows, and the explanation is one global
array sharded the same way. Row ``i`` of the whole data set uses ``fold_in(key, i)``, so the
values equal a single-process run.

On a cluster, start one copy per host (SLURM, Kubernetes and Cloud TPU fill in the arguments of
``jax.distributed.initialize()`` themselves)::

    python examples/explain_across_hosts.py --coordinator HOST0:1234 --processes 4 --process-id $RANK

To try it on one machine, ``--local N`` starts N CPU processes with a coordinator on 127.0.0.1
and checks their result against one process::

    python examples/explain_across_hosts.py --local 2
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

N_ROWS, N_FEATURES, N_BACKGROUND = 64, 6, 16


def problem():
    """The same model, background and rows in every process (a real job would read its shard)."""
    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(N_FEATURES, 16)).astype(np.float32)
    w2 = rng.normal(size=16).astype(np.float32)
    background = rng.normal(size=(N_BACKGROUND, N_FEATURES)).astype(np.float32)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    return (w1, w2), background, X


def make_explainer(params, background):
    import jax.numpy as jnp

    import jaxshap

    w1, w2 = params
    return jaxshap.PermutationExplainer(lambda x: jnp.tanh(x @ w1) @ w2, background, n_permutations=8)


def explain_distributed(coordinator: str, n_processes: int, process_id: int, out: str | None) -> np.ndarray:
    import jax

    jax.distributed.initialize(coordinator_address=coordinator, num_processes=n_processes, process_id=process_id)
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec

    params, background, X = problem()
    explainer = make_explainer(params, background)

    # One mesh axis over every device of every process; this process holds a contiguous slice of rows.
    mesh = jax.make_mesh((jax.device_count(),), ("rows",))
    per_process = N_ROWS // jax.process_count()
    mine = X[jax.process_index() * per_process : (jax.process_index() + 1) * per_process]
    X_global = jax.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec("rows")), mine)

    expl = explainer(X_global, key=jax.random.key(42))  # each device explains its own rows

    # The values are a global array: keep the local shards, or gather them (here, to compare).
    local = np.concatenate([np.asarray(s.data) for s in expl.values.addressable_shards])
    values = np.asarray(multihost_utils.process_allgather(expl.values, tiled=True))
    print(f"process {jax.process_index()}/{jax.process_count()}: {len(jax.local_devices())} local devices, "
          f"explained {local.shape[0]} rows; gathered {values.shape}", flush=True)
    if out is not None and jax.process_index() == 0:
        np.save(out, values)
    jax.distributed.shutdown()
    return values


def explain_single() -> np.ndarray:
    import jax

    params, background, X = problem()
    return np.asarray(make_explainer(params, background)(X, key=jax.random.key(42)).values)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local(n_processes: int, timeout: float = 240.0) -> int:
    """Start ``n_processes`` CPU workers on this machine and compare with one process."""
    coordinator = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "values.npy")
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        workers = [
            subprocess.Popen(
                [sys.executable, __file__, "--coordinator", coordinator, "--processes", str(n_processes),
                 "--process-id", str(i), "--out", out],
                env=env,
            )
            for i in range(n_processes)
        ]
        try:
            codes = [w.wait(timeout=timeout) for w in workers]
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
        if any(codes):
            print(f"workers exited with {codes}", file=sys.stderr)
            return 1
        distributed = np.load(out)
    single = explain_single()
    err = float(np.abs(distributed - single).max())
    print(f"{n_processes} processes vs 1 process: max |difference| = {err:.3g}")
    return 0 if err <= 1e-5 * max(1.0, float(np.abs(single).max())) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", type=int, metavar="N", help="start N CPU processes here and check the result")
    parser.add_argument("--coordinator", help="HOST:PORT of process 0")
    parser.add_argument("--processes", type=int, help="number of processes")
    parser.add_argument("--process-id", type=int, help="this process's index")
    parser.add_argument("--out", help="where process 0 saves the gathered values (.npy)")
    args = parser.parse_args(argv)
    if args.local:
        return run_local(args.local)
    if args.coordinator is None:
        parser.error("pass --local N, or --coordinator, --processes and --process-id")
    explain_distributed(args.coordinator, args.processes, args.process_id, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
