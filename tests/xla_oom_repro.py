"""Reproducer: XLA's CPU compiler kills the process when memory runs out while it compiles.

Run it as a script (``python tests/xla_oom_repro.py``); it is not a test. For a range of memory
headrooms it starts a child Python that initialises JAX, caps its own address space at what it
uses now plus the headroom (``RLIMIT_AS``), and compiles a small program. With enough headroom
the program runs; with too little, the child does not get a ``MemoryError`` it could handle: it
dies in native code (``std::bad_alloc`` thrown on an XLA thread: ``abort``, exit status -6; when
LLVM's code buffer is what fails, XLA logs "LLVM compilation error: Cannot allocate memory" and
the process segfaults, -11).

This is the "random" native crash seen in pytest-xdist workers of this suite, late in a run: a
worker's resident memory grows with every test it has run (about 5 GB after half the slow tier in
one process; in one untiered run of the whole suite, the kernel OOM-killed a 23.6 GB Python process
at the moment a worker died), so the compile that happens to run when memory is gone takes the
worker down. The suite's tiers
(``-m "not slow"``, then ``-m slow``, each in fresh workers) keep each worker's growth below the
machine's memory; ``tests/conftest.py`` still runs a test once more when its worker dies, and
names it in the summary.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import resource, sys
import jax, jax.numpy as jnp
jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[1]) * 2**20, resource.RLIM_INFINITY))
try:
    f = jax.jit(lambda x: sum(jnp.tanh(x * i) @ x.T for i in range(200)))
    print("compiled and ran:", float(f(jnp.ones((64, 64))).sum()))
except MemoryError as err:
    print("raised MemoryError:", err)
"""


def main() -> int:
    crashed = 0
    for headroom_mb in (8, 64, 128, 512):
        done = subprocess.run([sys.executable, "-c", CHILD, str(headroom_mb)], capture_output=True, text=True)
        last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or [""])[-1]
        print(f"headroom {headroom_mb:4d} MB: exit status {done.returncode:4d}  {last[:100]}")
        crashed += done.returncode < 0
    print(f"{crashed} of 4 children died in native code instead of raising")
    return 0


if __name__ == "__main__":
    sys.exit(main())
