"""jaxshap's own store of compiled programs (``_core/_platform``): a second process
loads what the first compiled, a damaged entry is compiled again, the store is bounded, can be
turned off, never changes JAX's configuration, and traced calls pass through ``jax.jit``."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap._core import _platform

JOB = """
import logging, numpy as np, jax, jax.numpy as jnp, jaxshap
compiled = []
class Count(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("Finished XLA compilation of") and "block_program" in record.getMessage():
            compiled.append(1)
jax.config.update("jax_log_compiles", True)
logging.getLogger("jax").addHandler(Count())
W = jnp.asarray(np.random.default_rng(0).normal(size=(5, 8)), jnp.float32)
X = np.random.default_rng(1).normal(size=(30, 5)).astype(np.float32)
v = jaxshap.ExactExplainer(lambda x: jnp.tanh(x @ W).sum(-1), X[:10])(X[10:14]).values
print(len(compiled), repr(np.asarray(v).tolist()), jax.config.jax_compilation_cache_dir)
"""


def _job(folder, devices=None):
    env = {**os.environ, "JAXSHAP_CACHE_DIR": str(folder)}
    if devices is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    out = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    n, rest = out.stdout.strip().splitlines()[-1].split(" ", 1)
    values, jax_dir = rest.rsplit(" ", 1)
    return int(n), values, jax_dir


def _entries(folder):
    programs = folder / "programs"
    return sorted(programs.glob("*.xla")) if programs.exists() else []


@pytest.mark.slow
def test_a_second_process_loads_the_program_and_a_damaged_entry_is_compiled_again(tmp_path):
    n1, v1, jax_dir = _job(tmp_path)
    assert n1 == 1 and jax_dir == "None"  # compiled once; JAX's own cache left as it was
    entries = _entries(tmp_path)
    assert len(entries) == 1
    n2, v2, _ = _job(tmp_path)
    assert n2 == 0 and v2 == v1  # loaded, not compiled: the same values
    data = entries[0].read_bytes()
    entries[0].write_bytes(data[:-100])  # truncated: its digest no longer matches
    n3, v3, _ = _job(tmp_path)
    assert n3 == 1 and v3 == v1
    assert _platform._read(str(entries[0])) is not None  # written again, whole
    n5, v5, _ = _job(tmp_path)
    assert n5 == 0 and v5 == v1
    n4, _, _ = _job("off")
    assert n4 == 1


@pytest.mark.slow
def test_a_process_with_several_devices_neither_stores_nor_loads(tmp_path):
    # jax 0.10.2 loads a stored one-device executable, in a process that sees two CPU devices, as
    # one that expects its arguments on both: the second process failed ("Expected args to
    # execute_sharded_on_local_devices to have 2 shards") before the store skipped such processes
    n1, v1, _ = _job(tmp_path, devices=2)
    n2, v2, _ = _job(tmp_path, devices=2)
    assert n1 == n2 == 1 and v2 == v1 and not _entries(tmp_path)
    n3, v3, _ = _job(tmp_path)  # one device: stored as before
    assert n3 == 1 and len(_entries(tmp_path)) == 1
    np.testing.assert_allclose(np.asarray(eval(v3)), np.asarray(eval(v1)), rtol=1e-5, atol=1e-6)


def test_an_entry_is_checked_and_the_store_is_bounded(tmp_path, monkeypatch):
    payload = b"x" * 1000
    _platform._write(str(tmp_path), str(tmp_path / "a.xla"), payload)
    assert _platform._read(str(tmp_path / "a.xla")) == payload
    (tmp_path / "b.xla").write_bytes(b"jaxshap-xla-1\n" + b"\0" * 32 + payload)  # a wrong digest
    assert _platform._read(str(tmp_path / "b.xla")) is None and not (tmp_path / "b.xla").exists()
    for i, name in enumerate(["c", "d", "e"]):
        _platform._write(str(tmp_path), str(tmp_path / f"{name}.xla"), payload)
        os.utime(tmp_path / f"{name}.xla", (1000 + i, 1000 + i))
    os.utime(tmp_path / "a.xla", (2000, 2000))  # used last
    _platform._evict(str(tmp_path), max_bytes=2 * 1046 + 10)
    assert sorted(p.name for p in tmp_path.glob("*.xla")) == ["a.xla", "e.xla"]
    assert not list(tmp_path.glob("*.tmp"))


def test_traced_calls_and_gradients_pass_through_jit(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXSHAP_CACHE_DIR", str(tmp_path))
    X = np.random.default_rng(2).normal(size=(12, 4)).astype(np.float32)

    def loss(w):
        return jaxshap.ExactExplainer(lambda x: jnp.tanh(x @ w), X[:6])(X[6:8]).values.sum()

    w = jnp.ones(4, jnp.float32)
    grad = jax.grad(loss)(w)
    eps = 1e-2
    numeric = [(loss(w.at[i].add(eps)) - loss(w.at[i].add(-eps))) / (2 * eps) for i in range(4)]
    np.testing.assert_allclose(np.asarray(grad), np.asarray(numeric), rtol=2e-2, atol=2e-3)
    assert jax.config.jax_compilation_cache_dir is None
