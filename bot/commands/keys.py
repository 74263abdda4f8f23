"""``compilewatch keys generate``: a key pair for signing published cache manifests."""

from __future__ import annotations

import os
from pathlib import Path

from compilewatch.core import signing
from compilewatch.core.errors import UsageError


def generate_command(*, out: Path) -> str:
    """Write a new private key to ``out`` (0600, never over an existing file); the lines to
    print: where the key went and the public key to pin."""
    pem, public = signing.generate()
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(f"{out} exists; choose another path (a key is never overwritten)") \
            from None
    except OSError as e:
        raise UsageError(f"{out}: {e.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return (f"private key: {out} (store it as the nightly's secret COMPILEWATCH_SIGNING_KEY; "
            f"keep it out of the repository)\n"
            f"public key: {public}\n"
            f"pin it in each consumer's pyproject.toml:\n"
            f"  [tool.compilewatch]\n"
            f'  cache_public_keys = ["{public}"]')
