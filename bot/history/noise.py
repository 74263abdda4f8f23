"""The noise ``compilewatch calibrate`` learned on a runner, read back from the database for a
comparison (``bot/judge/stats.py`` ``NoiseBands`` judges with it)."""

from __future__ import annotations

from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.core.errors import DatabaseError
from compilewatch.core.schema import RunResults
from compilewatch.db import connect, load_noise_bands


def noise_bands(db_url: str | None, run: RunResults) -> NoiseBands:
    """The noise ``compilewatch calibrate`` learned for the base run's environment, from the
    database (none: the defaults). Read-only: a missing database file is not created."""
    return noise_bands_of(db_url, run.environment.fingerprint)


def noise_bands_of(db_url: str | None, fingerprint: str) -> NoiseBands:
    """``noise_bands`` for an environment fingerprint, before any run of it exists."""
    try:
        with connect(db_url, must_exist=True) as db:
            bands = load_noise_bands(db, fingerprint)
    except DatabaseError:
        return NoiseBands()
    return NoiseBands(bands, source="calibrate") if bands else NoiseBands()
