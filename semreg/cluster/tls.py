"""TLS between the nodes (`--cluster-tls-cert/--cluster-tls-key/--cluster-tls-ca`), mutual: the cluster listener
serves its certificate and asks every client for one signed by the CA; a node calling another checks the
other's certificate against the same CA (and its advertised host name) and presents its own."""
from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any


def check(cert: Path | None, key: Path | None, ca: Path | None) -> bool:
    """Whether TLS is asked for; ValueError when the three flags are not given together or a file is unreadable."""
    given = [p is not None for p in (cert, key, ca)]
    if not any(given):
        return False
    if not all(given):
        raise ValueError("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together.")
    for flag, path in (("cert", cert), ("key", key), ("ca", ca)):
        assert path is not None
        if not path.is_file():
            raise ValueError(f"--cluster-tls-{flag} {path}: no such file.")
    return True


def client_context(cert: Path, key: Path, ca: Path) -> ssl.SSLContext:
    """What a node calls another with: the CA to check it by, and its own certificate."""
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(cert), str(key))
    return context


def server_options(cert: Path, key: Path, ca: Path) -> dict[str, Any]:
    """uvicorn's options for the cluster listener: a client without a certificate the CA signed is refused
    during the handshake."""
    return {"ssl_certfile": str(cert), "ssl_keyfile": str(key), "ssl_ca_certs": str(ca),
            "ssl_cert_reqs": ssl.CERT_REQUIRED}
