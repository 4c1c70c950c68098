"""How a node reaches etcd: over TLS (`--etcd-ca`, and `--etcd-cert/--etcd-key` when etcd asks for client
certificates) and as an etcd user (`--etcd-user`, its password in `--etcd-password-file`).

`aetcd` opens only plain gRPC channels; `TLSClient` is its client with the channel opened over TLS, the
rest (authentication, stubs, watcher) as aetcd sets them up. `client_factory` gives `EtcdKV` the function
it makes its clients with.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aetcd
import grpc
from aetcd import rpc, watcher


@dataclass(frozen=True)
class EtcdAccess:
    """What a node shows etcd: the CA it trusts etcd's certificate by, its own certificate, its user."""
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    user: str | None = None
    password: str | None = None

    @property
    def tls(self) -> bool:
        return self.ca is not None or self.cert is not None


def read_access(ca: Path | None, cert: Path | None, key: Path | None, user: str,
                password_file: Path | None) -> EtcdAccess:
    """The files the flags name, read; ValueError says which one is missing or wrong."""
    if (cert is None) != (key is None):
        raise ValueError("--etcd-cert and --etcd-key go together.")
    if bool(user) != (password_file is not None):
        raise ValueError("--etcd-user and --etcd-password-file go together.")

    def read(flag: str, path: Path | None) -> bytes | None:
        if path is None:
            return None
        try:
            return path.read_bytes()
        except OSError as exc:
            raise ValueError(f"--{flag} {path}: {exc.strerror or exc}") from exc

    password = read("etcd-password-file", password_file)
    return EtcdAccess(read("etcd-ca", ca), read("etcd-cert", cert), read("etcd-key", key), user or None,
                      password.decode("utf-8").strip() if password is not None else None)


if TYPE_CHECKING:
    class _Client:
        """What `TLSClient` uses of `aetcd.Client`, typed (aetcd ships no types); at run time, aetcd's own."""

        _host: str
        _port: int
        _username: str | None
        _password: str | None
        _timeout: int
        _options: dict[str, Any]
        _connected: asyncio.Event
        _is_connecting: bool
        _watcher: Any
        channel: Any
        metadata: Any
        auth_stub: Any
        kvstub: Any
        clusterstub: Any
        leasestub: Any
        maintenancestub: Any

        def __init__(self, *args: Any, **kw: Any) -> None: ...

        async def connect(self) -> None: ...
else:
    _Client = aetcd.Client


class TLSClient(_Client):
    """aetcd's client over a TLS channel."""

    def __init__(self, *args: Any, credentials: grpc.ChannelCredentials, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._credentials = credentials

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        if getattr(self, "_is_connecting", False):
            await super().connect()  # waits for the other task's connection
            return
        try:
            self._is_connecting = True
            self.channel = rpc.secure_channel(f"{self._host}:{self._port}", self._credentials,
                                              options=self._options.items())
            if self._username is not None and self._password is not None:
                self.auth_stub = rpc.AuthStub(self.channel)
                response = await self.auth_stub.Authenticate(
                    rpc.AuthenticateRequest(name=self._username, password=self._password), timeout=self._timeout)
                self.metadata = (("token", response.token),)
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout,
                                            metadata=self.metadata)
            self._connected.set()
        finally:
            self._is_connecting = False


def client_factory(access: EtcdAccess) -> Callable[[str, int, float], Any]:
    """How `EtcdKV` makes a client of `host:port` with a call timeout."""
    credentials = (grpc.ssl_channel_credentials(root_certificates=access.ca, private_key=access.key,
                                                certificate_chain=access.cert) if access.tls else None)

    def make(host: str, port: int, timeout_s: float) -> Any:
        kw: dict[str, Any] = {"host": host, "port": port, "timeout": int(max(1, timeout_s)), "connect_wait_timeout": 2,
                              "username": access.user, "password": access.password}
        if credentials is None:
            return aetcd.Client(**kw)
        return TLSClient(**kw, credentials=credentials)
    return make
