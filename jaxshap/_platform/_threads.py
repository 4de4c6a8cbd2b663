"""One BLAS thread while the library's linear algebra runs, through threadpoolctl when installed.

On a CPU, XLA's linear algebra (``eigvalsh``, ``cholesky``, triangular solves) is handed to
LAPACK from SciPy, which runs on SciPy's OpenBLAS; NumPy brings its own. OpenBLAS starts worker
threads on a large call, and they keep spinning for a while after it: beside XLA's own thread
pool on a machine with few busy cores they starve the work around them, the factorisation itself
included (measurements in ``CHANGELOG.md``). :func:`one_blas_thread` holds the BLAS libraries at
one thread for a block and restores their counts after, with ``threadpoolctl`` (scikit-learn
depends on it); without it the block runs as it is. Programs you compile yourself (a
``jax.jit`` around an explainer) are not covered: start Python with ``OPENBLAS_NUM_THREADS=1``,
or wrap the call in ``threadpoolctl.threadpool_limits(1)``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator


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
