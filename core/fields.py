"""The bounded field types every part of the results schema is built from, and the limits on
one results file: each string's length and alphabet, each integer's range (the column that
stores it), what no database can store. ``core/schema.py`` and ``core/kernels.py`` build on
these; ``core/results_file.py`` checks the file-wide limits."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"

# Limits on one results file (docs/security.md gives the reason and the cost of each).
MAX_FILE_BYTES = 64 * 1024 * 1024  # read no further
MAX_CONTAINERS = 1_000_000  # arrays and objects; 2,000 honest results hold about 50,000
MAX_DEPTH = 32  # nesting of arrays and objects; the schema itself needs 7
MAX_INT_CHARS = 20  # an integer's token: a sign and the 19 digits of a signed 64-bit integer
MAX_MODELS = 2_000  # results (compare and render cost about 40 ms each)
MAX_FILE_SAMPLES = 100_000  # timing samples (eager_us + compiled_us) over all results
MAX_MODEL_SAMPLES = 10_000  # timing samples of one result (the bootstrap holds 2,000 copies)
MAX_SHORT_CHARS = 256  # a short string: versions, phase and component names, times
MAX_TEXT_CHARS = 8192  # a text: error tails, graph-break and recompile reasons, notes
INT32_MAX = 2**31 - 1  # what an INTEGER column holds (4 bytes on Postgres)
INT64_MAX = 2**63 - 1  # what a BIGINT column (and any SQLite integer) holds

_SURROGATE = re.compile("[\ud800-\udfff]")


def _storable(text: str) -> str:
    """Refuse what no database column, and no UTF-8 file, can hold: NUL, and the lone
    surrogates that JSON's ``\\ud800`` escapes can smuggle into a string."""
    if "\x00" in text:
        raise ValueError("contains a NUL character (\\u0000), which a database cannot store")
    if not text.isascii() and _SURROGATE.search(text):
        raise ValueError("contains a lone surrogate (\\ud800-\\udfff), which is not valid UTF-8")
    return text


def utc_time(text: str) -> datetime:
    """An ISO 8601 time as an aware UTC time (no zone means UTC). Raises ``ValueError``
    naming the value: a date that does not exist (``2026-02-30``) or one that leaves the
    range of dates when moved to UTC (``0001-01-01T00:00:00+01:00``)."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text[:64]!r} is not an ISO 8601 time") from None
    try:
        return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text[:64]!r} is out of range in UTC") from None


def _is_time(text: str) -> str:
    utc_time(text)
    return text


Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Short = Annotated[str, StringConstraints(max_length=MAX_SHORT_CHARS), AfterValidator(_storable)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS), AfterValidator(_storable)]
Time = Annotated[str, StringConstraints(max_length=MAX_SHORT_CHARS), AfterValidator(_is_time)]
# Integers are bounded by the column that stores them, so that no database refuses a valid file.
Count32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
Positive32 = Annotated[int, Field(ge=1, le=INT32_MAX)]
Count64 = Annotated[int, Field(ge=0, le=INT64_MAX)]
Positive64 = Annotated[int, Field(ge=1, le=INT64_MAX)]
Hash = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_\-]{1,128}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
CommitSha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]
RunId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_\-]{8,64}$")]
Seconds = Annotated[float, Field(ge=0.0)]
ModuleName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
MAX_ORIGINS = 256  # top-level modules recorded per result and per run
Samples = Annotated[list[Annotated[float, Field(ge=0.0)]], Field(max_length=MAX_MODEL_SAMPLES)]


class Strict(BaseModel):
    """Every schema type: no unknown field, no non-finite number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
