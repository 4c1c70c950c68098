"""`semreg serve`: run a registry node."""
from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semreg import config
from semreg.config import Settings

if TYPE_CHECKING:
    from semreg.storage.store import Store

log = logging.getLogger("semreg.serve")
WILDCARDS = frozenset({"0.0.0.0", "::", "*"})  # hosts that listen on every address


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def _paths(value: str) -> list[Path]:
    return [Path(v) for v in value.split(os.pathsep) if v]


def _names(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    """`semreg serve`, one flag per settings field (`semreg.config`), each defaulting to its SEMREG_* variable."""
    p = sub.add_parser("serve", help="run a registry node", description="Run a semreg node. Every flag also reads "
                       "SEMREG_<FLAG> from the environment (SEMREG_DATA_DIR, SEMREG_PORT, ...); booleans take "
                       "1/true, repeated files a list separated by ':'.")
    from_env = config.environment(env)
    for f in config.options():
        meta = f.metadata
        name = "--" + meta["flag"]
        help_ = meta["help"] + f" (env {meta['env']})"
        raw = from_env.get(f.name)
        target: Any = p
        if f.name == "data_dir":
            target = p.add_mutually_exclusive_group()
            target.add_argument("--memory", action="store_true", default=_truthy(env.get("SEMREG_MEMORY", "")),
                                help="keep everything in memory; nothing survives a restart (env SEMREG_MEMORY)")
        if f.type == "bool" and f.default is True:  # on unless --no-FLAG
            target.add_argument(name, dest=f.name, action=argparse.BooleanOptionalAction,
                                default=_truthy(raw) if raw is not None else f.default, help=help_)
        elif f.type == "bool":
            target.add_argument(name, dest=f.name, action="store_true",
                                default=_truthy(raw) if raw is not None else f.default, help=help_)
        elif f.type == "tuple[Path, ...]":
            target.add_argument(name, dest=f.name, action="extend", nargs="+", type=Path, metavar=meta["metavar"],
                                default=_paths(raw) if raw is not None else [], help=help_)
        elif f.type == "tuple[str, ...]":
            target.add_argument(name, dest=f.name, type=_names, metavar=meta["metavar"],
                                default=raw if raw is not None else f.default, help=help_)
        else:
            kind = {"int": int, "float": float, "str": str, "Path | None": Path}[str(f.type)]
            shown = "" if f.default in (None, "") else f"; default {f.default}"
            target.add_argument(name, dest=f.name, type=kind, metavar=meta["metavar"], choices=meta["choices"],
                                default=raw if raw is not None else f.default, help=help_ + shown)
    p.set_defaults(run=run)


def settings_from(args: argparse.Namespace) -> Settings:
    values = {f.name: getattr(args, f.name) for f in config.options()}
    values["ontologies"] = tuple(values["ontologies"])
    if args.memory:
        values["data_dir"] = None
    if not values["rate_burst"]:
        values["rate_burst"] = values["rate_limit_per_s"]
    return Settings(**values)


def cluster_settings(settings: Settings) -> Settings:
    """Check a cluster node's flags and fill in what defaults to the listening address; ValueError says why."""
    from urllib.parse import urlsplit

    from semreg.cluster import tls
    from semreg.cluster.etcd_access import read_access
    from semreg.cluster.kv import parse_endpoints
    from semreg.node.listeners import cluster_listen

    parse_endpoints(settings.etcd)
    read_access(settings.etcd_ca, settings.etcd_cert, settings.etcd_key, settings.etcd_user,
                settings.etcd_password_file)
    if settings.cluster_secret_file is None:
        raise ValueError("--etcd needs --cluster-secret FILE: node-to-node requests carry that secret "
                         "(make one with: head -c 32 /dev/urandom | base64 > cluster.secret).")
    try:
        secret = settings.cluster_secret_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"--cluster-secret {settings.cluster_secret_file}: {exc.strerror or exc}") from exc
    if len(secret) < 16:
        raise ValueError(f"--cluster-secret {settings.cluster_secret_file}: the secret must be at least 16 "
                         f"characters long.")
    listen_host, listen_port = cluster_listen(settings.cluster_listen)
    if listen_port == settings.port and (listen_host == settings.host or WILDCARDS & {listen_host, settings.host}):
        raise ValueError(f"--cluster-listen {settings.cluster_listen}: that is the public listener's address "
                         f"(--host {settings.host} --port {settings.port}); node-to-node requests need a port of "
                         f"their own.")
    scheme = "https" if tls.check(settings.cluster_tls_cert, settings.cluster_tls_key, settings.cluster_tls_ca) \
        else "http"
    advertise = settings.advertise or f"{scheme}://{listen_host}:{listen_port}"
    parts = urlsplit(advertise)
    host = parts.hostname or ""
    if parts.scheme != scheme:
        raise ValueError(f"--advertise {advertise}: the cluster listener speaks {scheme}; give {scheme}://HOST:PORT.")
    if not host or parts.port is None:
        raise ValueError(f"--advertise {advertise}: give the URL other nodes reach this one at, as "
                         f"http://HOST:PORT.")
    if host in WILDCARDS:
        raise ValueError(f"--advertise {advertise}: a wildcard address does not say where this node is; listening "
                         f"on {listen_host}, give --advertise {scheme}://<this host's address>:{listen_port}.")
    if not 1 <= settings.replicas <= 16:
        raise ValueError("--replicas takes 1 to 16 copies.")
    return settings.replace(advertise=advertise.rstrip("/"), node_id=settings.node_id or f"{host}:{parts.port}")


def check_dns(settings: Settings) -> None:
    """The `--dns*` flags, checked before anything starts; ValueError says why not."""
    if not settings.dns:
        return
    from semreg.dns.names import zone
    from semreg.dns.server import parse_listen

    parse_listen(settings.dns)
    zone(settings.dns_domain)
    if not 0 <= settings.dns_ttl_s <= 2**31 - 1:
        raise ValueError(f"--dns-ttl {settings.dns_ttl_s}: give whole seconds from 0.")
    if settings.dns_rate_per_s < 0:
        raise ValueError(f"--dns-rate {settings.dns_rate_per_s}: give queries a second, or 0 for no limit.")
    for flag, count in (("--dns-tcp-connections", settings.dns_tcp_connections),
                        ("--dns-tcp-per-address", settings.dns_tcp_per_address)):
        if count < 1:
            raise ValueError(f"{flag} {count}: give a number of connections from 1.")
    for flag, seconds in (("--dns-tcp-timeout", settings.dns_tcp_timeout_s),
                          ("--dns-tcp-write-timeout", settings.dns_tcp_write_timeout_s)):
        if not 0 < seconds < math.inf:
            raise ValueError(f"{flag} {seconds}: give seconds above 0.")


def check_consul(settings: Settings) -> None:
    """`--consul-listen`, checked before anything starts: an address of its own; ValueError says why not."""
    if not settings.consul_listen:
        return
    from semreg.node.listeners import listen_address

    host, port = listen_address(settings.consul_listen, "--consul-listen")
    if port == settings.port and (host == settings.host or WILDCARDS & {host, settings.host}):
        raise ValueError(f"--consul-listen {settings.consul_listen}: that is the public listener's address "
                         f"(--host {settings.host} --port {settings.port}); the Consul API needs a port of its own.")


def beyond_loopback(settings: Settings) -> list[tuple[str, str]]:
    """Each listener of `settings` on an address beyond loopback, as (its flag, its value): the public port,
    `--dns`, `--cluster-listen` and `--consul-listen` (a value that does not parse is left to its own check)."""
    out = [("--host", settings.host)] if not is_loopback(settings.host) else []
    for flag, value in (("--dns", settings.dns), ("--cluster-listen", settings.cluster_listen),
                        ("--consul-listen", settings.consul_listen)):
        host, sep, _ = value.strip().rpartition(":")
        if value and sep and host and not is_loopback(host.strip("[]")):
            out.append((flag, value))
    return out


def check_open(settings: Settings) -> None:
    """Without tokens, no listener beyond loopback unless --insecure; ValueError naming the first otherwise."""
    exposed = beyond_loopback(settings)
    if settings.tokens_file is not None or settings.insecure or not exposed:
        return
    flag, value = exposed[0]
    raise ValueError(f"refusing to listen on {value} ({flag} {value}) with no tokens: anyone who can reach it "
                     f"could deregister every service or read every environment. Give --tokens FILE, listen on "
                     f"127.0.0.1, or pass --insecure.")


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one: each watch holds a connection."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            hard = 1 << 20
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    except (ImportError, ValueError, OSError):
        return -1


def open_store(settings: Settings) -> Store | None:
    """The data directory's store (in memory without one), its opening timed in the log; None, said on
    stderr, when it cannot be opened (another process holds it, or it is not a store)."""
    from semreg.storage.store import Store, StoreError

    started = time.perf_counter()
    try:
        store = Store(settings.data_dir)
    except StoreError as exc:
        print(f"semreg: {exc}", file=sys.stderr)
        return None
    log.info("store opened", extra={"data_dir": str(settings.data_dir or ":memory:"),
                                    "ms": round((time.perf_counter() - started) * 1000)})
    return store


def run(args: argparse.Namespace) -> int:
    from semreg import logs, malloc
    from semreg.node import Node, process

    settings = settings_from(args)
    logs.configure(settings.log_level, settings.log_format)
    malloc.cap_arenas()  # before the store and the node start their threads
    raise_open_files_limit()
    if not 1 <= settings.sparql_workers <= settings.sparql_max_workers:
        print(f"semreg: --sparql-workers must be at least 1 and at most --sparql-max-workers "
              f"({settings.sparql_workers} and {settings.sparql_max_workers} given).", file=sys.stderr)
        return 2
    if not 0 < settings.service_stop_timeout_s < math.inf:
        print(f"semreg: --service-stop-timeout {settings.service_stop_timeout_s}: give seconds above 0.",
              file=sys.stderr)
        return 2
    if settings.tokens_file is not None:
        from semreg.access.tokens import Tokens, TokensFileError

        try:
            Tokens(settings.tokens_file)
        except TokensFileError as exc:
            print(f"semreg: {exc}", file=sys.stderr)
            return 2
    try:
        settings = cluster_settings(settings) if settings.etcd else settings
        check_dns(settings)
        check_consul(settings)
        check_open(settings)
    except ValueError as exc:
        print(f"semreg: {exc}", file=sys.stderr)
        return 2
    for path in settings.ontologies:
        if not path.is_file():
            print(f"semreg: --ontology {path}: no such file.", file=sys.stderr)
            return 2
    store = open_store(settings)
    if store is None:
        return 1
    node = Node(settings, store=store, listen=True)
    # The process raises the signal that stopped it again once the node has stopped; after a clean stop on
    # SIGTERM the exit status should be 0, so the handler it restores and raises only notes the stop (which also
    # covers a SIGTERM before the node's own handlers are in place).
    signal.signal(signal.SIGTERM, lambda signum, frame: node.stop_asked.set())
    return process.run(node)
