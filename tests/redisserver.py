"""A real redis-server of a test's own, on a free loopback port: its own users (ACL), password
and TLS where a test asks, no persistence, stopped when the test is done."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Server:
    port: int
    folder: Path
    ca: Path | None = None  # the CA file a TLS client trusts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"redis-server did not listen on 127.0.0.1:{port}")


@contextlib.contextmanager
def redis_server(folder: Path, *, users: tuple[str, ...] = (), tls: bool = False
                 ) -> Iterator[Server]:
    """Start ``redis-server`` with ``users`` (ACL lines, ``user NAME ...``); with ``tls``, on
    a TLS port only, its certificate signed by a CA of the test's own."""
    exe = shutil.which("redis-server")
    if exe is None:
        if os.environ.get("CI"):  # .ci/run installs one: a skip there would hide these tests
            pytest.fail("redis-server is not installed on this CI machine")
        pytest.skip("redis-server is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    lines = ["bind 127.0.0.1", "save ''", "appendonly no", f"dir {folder}",
             "protected-mode yes", *users]
    ca = None
    if tls:
        ca, cert, key = certificates(folder)
        lines += ["port 0", f"tls-port {port}", f"tls-cert-file {cert}", f"tls-key-file {key}",
                  f"tls-ca-cert-file {ca}", "tls-auth-clients no"]
    else:
        lines.append(f"port {port}")
    conf = folder / "redis.conf"
    conf.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen([exe, str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _ready(port)
        yield Server(port, folder, ca)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for 127.0.0.1 it signed: (ca, cert, key) PEM files."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("test ca")).issuer_name(name("test ca"))
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths
