"""Student-t quantiles in pure Python, so that judging a comparison needs neither scipy nor
numpy: the jobs that hold a write token (``post``, the nightly's release) install nothing they
do not import (docs/security.md, "Privileged installs").

The two-sided coverage P(|T| <= q) of ν degrees of freedom is the regularized incomplete beta
function I_{q²/(ν+q²)}(1/2, ν/2), evaluated by its continued fraction (Lentz's method), and the
quantile is its root by Newton's method; from ν = 10⁴ on, where the fraction converges slowly,
the quantile's series in 1/ν is exact to rounding. Against 30-digit arithmetic the error is at
most 5e-11 (relative, at ν = 1 and 0.999999), where scipy's ``stats.t.ppf`` is off by 1.1e-10;
``tests/core/test_tdist.py`` holds it to scipy's from ν = 1 to 10⁹.
"""

from __future__ import annotations

import math
from statistics import NormalDist

_TINY = 1e-300
_EPS = 1e-16
_MAX_TERMS = 10_000  # the fraction needs about √ν terms; ν < _LARGE_DF here
_LARGE_DF = 10_000


def _fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), converging fast for x < (a + 1) / (a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= c * d
        if abs(c * d - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta fraction did not converge (a={a}, b={b}, x={x})")


def _log_gamma_ratio(a: float) -> float:
    """log(Γ(a + 1/2) / Γ(a)). For large a, ``lgamma(a + 0.5) - lgamma(a)`` subtracts two
    large numbers (1e-7 lost at a = 10⁸), so the asymptotic series is used from a = 20 on,
    where its first neglected term is below 1e-15."""
    if a < 20.0:
        return math.lgamma(a + 0.5) - math.lgamma(a)
    return (0.5 * math.log(a) - 1 / (8 * a) + 1 / (192 * a**3) - 1 / (640 * a**5)
            + 17 / (14336 * a**7))


_LOG_SQRT_PI = 0.5 * math.log(math.pi)  # log Γ(1/2)


def coverage(q: float, df: int) -> float:
    """P(|T| <= q) for Student's t with ``df`` >= 1 degrees of freedom: I_x(1/2, ν/2) with
    x = q²/(ν+q²), its logarithms taken without rounding 1 - x first."""
    if q <= 0.0:
        return 0.0
    q2 = q * q
    if q2 > 1e300:
        return 1.0
    a, b = 0.5, df / 2.0
    x, y = q2 / (df + q2), df / (df + q2)
    log_front = (0.5 * math.log(x) - b * math.log1p(q2 / df)
                 + _log_gamma_ratio(b) - _LOG_SQRT_PI)  # minus log B(1/2, ν/2)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _fraction(a, b, x) / a
    return 1.0 - front * _fraction(b, a, y) / b


def _density(q: float, df: int) -> float:
    log_norm = _log_gamma_ratio(df / 2.0) - _LOG_SQRT_PI - 0.5 * math.log(df)
    return math.exp(log_norm - (df + 1) / 2.0 * math.log1p(q * q / df))


def _expansion(z: float, df: int) -> float:
    """The quantile's series in 1/ν about the normal one (Abramowitz and Stegun 26.7.5). Where
    the continued fraction converges slowly (large ν), this is exact to rounding: its first
    neglected term is below 1e-16 for ν >= 10⁴ up to z = 5."""
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


def two_sided_quantile(confidence: float, df: int) -> float:
    """The q with P(|T| <= q) = ``confidence`` (df >= 1), or the normal one for df <= 0: the
    half-width, in standard errors, of a two-sided interval."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    if df <= 0:
        return z
    if df >= _LARGE_DF:
        return _expansion(z, df)
    # Coverage is concave in q > 0, so Newton's steps approach the root from below without
    # overshooting, after at most one step from above. The series, though not exact for small
    # ν, starts them close (the normal quantile for ν <= 2, where the series diverges).
    q = _expansion(z, df) if df > 2 else z
    for _ in range(200):
        step = (confidence - coverage(q, df)) / (2.0 * _density(q, df))
        if not math.isfinite(step):
            break
        if abs(step) <= q * 1e-12:  # quadratic convergence: the next step is rounding
            return q + step
        q = q + step if q + step > 0 else q / 2
    raise ArithmeticError(f"t quantile did not converge (confidence={confidence}, df={df})")
