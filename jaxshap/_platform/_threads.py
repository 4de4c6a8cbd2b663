"""One BLAS thread for the library's own host linear algebra, through threadpoolctl when installed.

On a CPU, XLA's linear algebra (``eigvalsh``, ``cholesky``, triangular solves) runs on SciPy's
OpenBLAS, and NumPy brings its own. Both start worker threads on the first large call, which
keep spinning for a while after each call; on a machine with few busy cores they starve the XLA
work that follows. :func:`one_blas_thread` holds every loaded BLAS at one thread for a block of
host work and restores the counts after, with ``threadpoolctl.threadpool_limits`` (scikit-learn
depends on it; without it the block runs unchanged). Users who call NumPy or SciPy linear
algebra themselves between explanations can start Python with ``OPENBLAS_NUM_THREADS=1`` for the
same effect on their own calls.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run a block with every loaded BLAS library at one thread (``threadpoolctl``), restored after;
    without ``threadpoolctl`` the block runs as it is. The block must wait for its results
    (``np.asarray`` or ``block_until_ready``): work still running after it has the old counts."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
