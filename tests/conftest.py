import contextlib
import logging
import os
import pathlib
import sys
import tempfile
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("MPLBACKEND", "Agg")


# jaxshap's own store of compiled programs: a fresh folder per test process (never ~/.cache)
os.environ.setdefault("JAXSHAP_CACHE_DIR", tempfile.mkdtemp(prefix="jaxshap-test-programs-"))

def make_mlp(seed: int, n_features: int, hidden: int = 8, n_outputs: int | None = None):
    """A small random tanh MLP as (params, apply) with ``apply(params, X)``."""
    rng = np.random.default_rng(seed)
    out = () if n_outputs is None else (n_outputs,)
    params = {
        "w1": jnp.asarray(rng.normal(size=(n_features, hidden)), jnp.float32),
        "b1": jnp.asarray(rng.normal(size=hidden), jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(hidden,) + out), jnp.float32),
    }

    def apply(p, X):
        return jnp.tanh(X @ p["w1"] + p["b1"]) @ p["w2"]

    return params, apply


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def sampled_silently(caplog):
    """``with sampled_silently(message):`` no warning inside (shap samples a background silently),
    and ``message`` logged at INFO level on the "jaxshap" logger (as shap 0.52 logs it)."""

    @contextlib.contextmanager
    def check(message):
        caplog.clear()
        with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="jaxshap"):
            warnings.simplefilter("error")
            yield
        assert message in caplog.text, caplog.text

    return check


class CountCompiles(logging.Handler):
    """Counts XLA compilations (``jax_log_compiles``) inside a ``with`` block."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Finished XLA compilation of"):
            self.names.append(message.split()[4])

    def __enter__(self):
        self._old = jax.config.jax_log_compiles
        jax.config.update("jax_log_compiles", True)
        logging.getLogger("jax").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("jax").removeHandler(self)
        jax.config.update("jax_log_compiles", self._old)


# --- test tiers --------------------------------------------------------------------------------
SLOW_TESTS = pathlib.Path(__file__).with_name("slow_tests.txt")


def _slow_entries() -> list[str]:
    lines = SLOW_TESTS.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def pytest_collection_modifyitems(config, items):
    """Mark the tests listed in ``tests/slow_tests.txt`` (files, folders or node ids; an id without
    parameters covers all of them) ``slow``: the README's command runs the others
    (``-m 'not slow'``, the default), ``-m slow`` these."""
    entries = _slow_entries()
    files = tuple(e for e in entries if "::" not in e)
    ids = {e for e in entries if "::" in e}
    for item in items:
        if item.nodeid in ids or item.nodeid.split("[", 1)[0] in ids or item.nodeid.startswith(files):
            item.add_marker(pytest.mark.slow)


# --- a worker that dies in native code -----------------------------------------------------------
# Workers have died in native code while XLA compiled a program, late in a run. The cause is memory:
# a worker's resident memory grows with the tests it has run, and when a compile finds none left,
# XLA's CPU compiler aborts or segfaults instead of raising MemoryError. tests/xla_oom_repro.py
# reproduces it (a child capped with RLIMIT_AS: exit -6 or -11). The tiers, each a fresh pytest
# session, keep every worker well below the machine's memory; should a worker still die, the test
# it was running runs once more, on a fresh worker, and the summary names it. A second crash of the
# same test fails it, as does any assertion.
_CRASHED: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    """pytest-xdist (controller): queue a crashed test once more instead of failing it."""
    if crashitem in _CRASHED:
        return
    _CRASHED.append(crashitem)
    try:
        sched.mark_test_pending(crashitem)
    except NotImplementedError:  # a scheduler that cannot requeue: the crash fails the test
        return
    report.outcome = "rerun"


def pytest_report_teststatus(report, config):
    if report.outcome == "rerun":
        return "rerun", "R", "RERUN (its worker crashed)"


def pytest_terminal_summary(terminalreporter):
    for nodeid in _CRASHED:
        terminalreporter.write_line(
            f"CRASH: the worker running {nodeid} died (a native crash); the test ran again on a fresh worker, "
            "and its result above is the second run's.",
            yellow=True,
            bold=True,
        )
