"""What a node listens on, each as a service: the public HTTP port and the node-to-node one (uvicorn servers, run
by the node rather than by uvicorn's own `run`: the node starts them after the parts their routes need and stops
them first), the Consul-compatible API's port of `--consul-listen` (`semreg.consul`), and the DNS listeners of
`--dns` (`semreg.dns.server`).

An HTTP listener started binds its socket (a port taken fails the start-up; uvicorn's log line says why) and keeps
its date header current; stopped, it stops accepting, asks its connections to close, waits for what they are
answering (`timeout_graceful_shutdown`), then ends. `exited()` returns once it was told to stop (a signal).
"""
from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from starlette.applications import Starlette

from semreg.clock import Clock
from semreg.cluster import tls
from semreg.config import Settings
from semreg.dns.answers import Zone
from semreg.dns.apex import listen_addresses
from semreg.dns.connections import Limits
from semreg.dns.directory import Directory
from semreg.dns.names import zone
from semreg.dns.server import DnsServer, parse_listen
from semreg.knowledge.knowledge import Knowledge
from semreg.node.services import CannotStart
from semreg.registry.coordinator import Coordinator
from semreg.registry.saved import Questions
from semreg.sparql.pool import QueryPool


class ListenError(CannotStart):
    """An HTTP listener could not take its address."""


class HttpListener:
    def __init__(self, name: str, config: uvicorn.Config, *, needs: tuple[str, ...]) -> None:
        self.name = name
        self.needs = needs
        self.server = uvicorn.Server(config)
        self._serving: asyncio.Future[None] | None = None

    async def start(self) -> None:
        config = self.server.config
        if not config.loaded:
            config.load()
        self.server.lifespan = config.lifespan_class(config)  # off: the node runs what lives around the app
        try:
            await self.server.startup()
        except SystemExit:  # uvicorn's word for an address it could not bind (its log says why)
            raise ListenError(f"{self.name}: cannot listen on {config.host}:{config.port}") from None
        self._serving = asyncio.ensure_future(self.server.main_loop())

    async def exited(self) -> None:
        """Once the listener was told to stop (`should_exit`)."""
        if self._serving is not None:
            await self._serving

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.exited()
        if self.server.started:
            await self.server.shutdown()

    def waiting(self) -> str:
        return ""


def public(app: Starlette, settings: Settings, pool: QueryPool | None, *, needs: tuple[str, ...]) -> HttpListener:
    """The public port: the API, the console and `/sparql`, whose connections go to the query processes
    (`pool`) as they come, unless --sparql-in-server (or no query processes: the app answers)."""
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, access_log=False,
                            lifespan="off", timeout_graceful_shutdown=10, backlog=4096, server_header=False,
                            forwarded_allow_ips=settings.forwarded_allow_ips, http=http_protocol(settings, pool))
    return HttpListener("public listener", config, needs=needs)


def http_protocol(settings: Settings, pool: QueryPool | None) -> type | str:
    """uvicorn's HTTP protocol, behind the hand-over of `/sparql` connections to the query processes
    (`semreg.sparql.handoff`), unless --sparql-in-server."""
    if settings.sparql_in_server or pool is None:
        return "auto"
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    from semreg.sparql.handoff import Handoff

    return Handoff.bind(import_from_string(HTTP_PROTOCOLS["auto"]), pool)


def node_to_node(app: Starlette, settings: Settings, *, needs: tuple[str, ...]) -> HttpListener:
    """`--cluster-listen`: the internal API, over TLS with `--cluster-tls-*`."""
    host, port = cluster_listen(settings.cluster_listen)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="off",
                            backlog=4096, server_header=False, timeout_graceful_shutdown=5, **cluster_tls(settings))
    return HttpListener("cluster listener", config, needs=needs)


def cluster_listen(value: str) -> tuple[str, int]:
    """`--cluster-listen HOST:PORT` → (host, port); ValueError says why not."""
    if not value:
        raise ValueError("--etcd needs --cluster-listen HOST:PORT: node-to-node requests are served there, never "
                         "on the public port.")
    return listen_address(value, "--cluster-listen")


def listen_address(value: str, flag: str) -> tuple[str, int]:
    """A listener's `HOST:PORT` (an IPv6 host in brackets) → (host, port); ValueError naming `flag` otherwise."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{flag} {value}: give HOST:PORT.")
    return host.strip("[]"), int(port)


def consul(app: Starlette, settings: Settings, *, needs: tuple[str, ...]) -> HttpListener:
    """`--consul-listen`: the Consul-compatible API (`semreg.consul`), a port of its own beside the public one."""
    host, port = listen_address(settings.consul_listen, "--consul-listen")
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="off",
                            backlog=4096, server_header=False, timeout_graceful_shutdown=10,
                            forwarded_allow_ips=settings.forwarded_allow_ips)
    return HttpListener("consul listener", config, needs=needs)


def cluster_tls(settings: Settings) -> dict[str, Any]:
    """uvicorn's TLS options for the cluster listener (none without --cluster-tls-*)."""
    cert, key, ca = settings.cluster_tls_cert, settings.cluster_tls_key, settings.cluster_tls_ca
    return tls.server_options(cert, key, ca) if cert and key and ca else {}


def dns_server(settings: Settings, coordinator: Coordinator, knowledge: Knowledge, questions: Questions,
               clock: Clock) -> DnsServer:
    """The DNS listeners of `--dns`, answering the saved queries through the coordinator."""
    directory = Directory(coordinator, knowledge, questions)
    served = Zone(zone(settings.dns_domain), settings.dns_ttl_s, wall=clock.wall,
                  addresses=listen_addresses(parse_listen(settings.dns)[0]))
    tcp = Limits(settings.dns_tcp_connections, settings.dns_tcp_per_address, settings.dns_tcp_timeout_s,
                 settings.dns_tcp_write_timeout_s)
    return DnsServer(directory, served, settings.dns, settings.dns_rate_per_s, clock=clock, tcp=tcp)
