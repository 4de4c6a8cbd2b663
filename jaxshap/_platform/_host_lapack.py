r"""The inverse of a symmetric positive-definite matrix on the host, through its Cholesky factor.

NumPy has no Cholesky inverse: ``np.linalg.inv`` factorises by LU with pivoting and then inverts
the factors, about :math:`2 n^3` flops. LAPACK's ``dpotrf`` (:math:`A = L L^T`) followed by
``dpotri`` (:math:`A^{-1}` from :math:`L`) takes about :math:`n^3`. NumPy's wheels carry a complete OpenBLAS, LAPACK included, and
:func:`spd_inverse` calls those two routines through :mod:`ctypes` (SciPy's wrappers would do the
same, but importing ``scipy.linalg`` in a fresh process costs more than the whole factorisation
of a one-off job). The routines are looked up in the OpenBLAS libraries the process
has loaded (:mod:`jaxshap._platform._threads`), under the symbol names of NumPy's wheels
(``scipy_`` prefix, 64-bit integers, ``64_`` suffix) and of plain LP64 builds, with the integer
width the library's ``openblas_get_config`` reports; the first use checks them against
``np.linalg.inv`` on a small matrix. Where they are missing, fail that check,
or report the matrix as not positive definite, ``np.linalg.inv`` is used instead.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ._threads import _loaded_openblas, loaded_library

_FOUND: list = []
"""``[(potrf, potri, int type)]`` once looked up (``[None]`` when unavailable)."""
_LOCK = threading.Lock()
_NAMES = (("scipy_", "64_", ctypes.c_int64), ("", "64_", ctypes.c_int64), ("", "", ctypes.c_int32))


def _lookup():
    """``(potrf, potri, int type)`` from a loaded OpenBLAS, or ``None``."""
    for path in _loaded_openblas():
        lib = loaded_library(path)
        for prefix, suffix, itype in _NAMES if lib is not None else ():
            potrf = getattr(lib, f"{prefix}dpotrf_{suffix}", None)
            potri = getattr(lib, f"{prefix}dpotri_{suffix}", None)
            config = getattr(lib, f"{prefix}openblas_get_config{suffix}", None)
            if potrf is not None and potri is not None and config is not None:
                # the integer width must be the build's: a mismatch would crash, not just err
                config.restype, config.argtypes = ctypes.c_char_p, []
                if (b"USE64BITINT" in (config() or b"")) != (itype is ctypes.c_int64):
                    continue
                for fn in (potrf, potri):
                    # uplo, n, a, lda, info, and the length of uplo (Fortran's hidden argument)
                    fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(itype), ctypes.c_void_p,
                                   ctypes.POINTER(itype), ctypes.POINTER(itype), ctypes.c_size_t]
                    fn.restype = None
                return potrf, potri, itype
    return None


def _cholesky_inverse(a: np.ndarray, routines) -> np.ndarray | None:
    """The inverse by ``dpotrf`` + ``dpotri``, or ``None`` if the factorisation fails.

    ``a`` is symmetric, so its C-ordered copy is also its column-major layout: LAPACK's lower
    triangle is the copy's upper one, which ends up holding the inverse and is mirrored below
    the diagonal block by block (transposed copies that stay in cache).
    """
    potrf, potri, itype = routines
    n = a.shape[0]
    work = np.array(a, dtype=np.float64, order="C")
    size, info = itype(n), itype(0)
    potrf(b"L", ctypes.byref(size), work.ctypes.data, ctypes.byref(size), ctypes.byref(info), 1)
    if info.value != 0:
        return None
    potri(b"L", ctypes.byref(size), work.ctypes.data, ctypes.byref(size), ctypes.byref(info), 1)
    if info.value != 0:
        return None
    step = 128
    for i in range(0, n, step):
        j = min(i + step, n)
        work[i:j, :i] = work[:i, i:j].T
        block = work[i:j, i:j]
        block[...] = np.triu(block) + np.triu(block, 1).T
    return work


def _routines():
    """The checked routines, or ``None`` (looked up once)."""
    with _LOCK:
        if not _FOUND:
            routines = None
            try:
                routines = _lookup()
                if routines is not None:
                    probe = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
                    got = _cholesky_inverse(probe, routines)
                    if got is None or not np.allclose(got, np.linalg.inv(probe), rtol=1e-12, atol=1e-12):
                        routines = None
            except Exception:  # any failure of the lookup or the check: NumPy's inverse
                routines = None
            _FOUND.append(routines)
        return _FOUND[0]


def spd_inverse(a: np.ndarray) -> np.ndarray:
    """The inverse of a symmetric positive-definite float64 matrix ``a [n, n]`` (see the module)."""
    routines = _routines() if a.shape[0] > 1 else None
    out = _cholesky_inverse(a, routines) if routines is not None else None
    return np.linalg.inv(a) if out is None else out
