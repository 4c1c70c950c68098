"""This node in a ring (`--etcd`): the cluster's parts made from the flags (etcd, its TLS and user, the cluster
secret, mutual TLS between nodes, the lease's pacemaker thread), and membership as a service.

Started, membership joins in a task of its own (`semreg.cluster.cluster.Cluster.start`: it reads the member
list, catches up with what every node holds whole, then takes its place on the ring; while etcd cannot be reached
it keeps trying), so the start-up goes on: the service is ready, and the node with it, once it has joined
(`waiting` says why not yet). Its pacemaker (`semreg.cluster.pacemaker`) refreshes the lease from a thread of its
own while it is on the ring. Stopped, it calls off a join still under way and the sends of acknowledged writes still
on their way, hands its records to their owners without it, and leaves.
"""
from __future__ import annotations

import asyncio
import logging
import ssl

from semreg.clock import Clock
from semreg.cluster import pacemaker as pacemakers
from semreg.cluster import tls
from semreg.cluster.cluster import Cluster
from semreg.cluster.etcd_access import EtcdAccess, client_factory, read_access
from semreg.cluster.kv import KV, EtcdKV, parse_endpoints
from semreg.config import Settings
from semreg.knowledge.knowledge import Knowledge
from semreg.registry.coordinator import Coordinator
from semreg.registry.local_shard import LocalShard
from semreg.work.lane import Lane

log = logging.getLogger("semreg.node")


def ring_of(settings: Settings, clock: Clock, kv: KV | None, shard: LocalShard, coordinator: Coordinator,
            knowledge: Knowledge, lane: Lane) -> Cluster:
    """This node's handle on the ring. `kv`: the cluster's store (etcd at `--etcd` when None, its lease also
    refreshed from a thread of its own)."""
    pacemaker = None
    if kv is None:
        endpoints, client = parse_endpoints(settings.etcd), client_factory(etcd_access(settings))
        kv = EtcdKV(endpoints, clock=clock, client=client)
        pacemaker = pacemakers.for_etcd(endpoints, client, settings.member_lease_ttl_s)
    return Cluster(kv=kv, cluster=settings.cluster, node_id=settings.node_id, address=settings.advertise,
                   replicas=settings.replicas, secret=read_secret(settings), local=shard, removals=shard.removals,
                   revisions=shard.revisions, lane=lane, coordinator=coordinator,
                   knowledge=knowledge, clock=clock, lease_ttl_s=settings.member_lease_ttl_s, tls=peer_tls(settings),
                   sparql=settings.sparql, pacemaker=pacemaker)


class Membership:
    name = "membership"

    def __init__(self, cluster: Cluster, coordinator: Coordinator, *, needs: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.coordinator = coordinator
        self.needs = needs
        self.joined = False
        self._joining: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._joining = asyncio.get_running_loop().create_task(self._join())

    async def _join(self) -> None:
        await self.cluster.start()
        self.joined = True
        log.info("node ready", extra={"node": self.cluster.node_id, "members": len(self.cluster.ring)})

    async def stop(self) -> None:
        if self._joining is not None and not self._joining.done():
            self._joining.cancel()
        await self.coordinator.close()  # acknowledged writes still on their way to other owners
        await self.cluster.leave()  # hands its records over, then leaves the ring

    def waiting(self) -> str:
        return "" if self.joined else self.cluster.waiting or "joining the cluster."


def peer_tls(settings: Settings) -> ssl.SSLContext | None:
    """What this node calls the others with when the cluster speaks TLS (`semreg.cluster.tls`)."""
    cert, key, ca = settings.cluster_tls_cert, settings.cluster_tls_key, settings.cluster_tls_ca
    if cert is None or key is None or ca is None:
        return None
    return tls.client_context(cert, key, ca)


def etcd_access(settings: Settings) -> EtcdAccess:
    return read_access(settings.etcd_ca, settings.etcd_cert, settings.etcd_key, settings.etcd_user,
                       settings.etcd_password_file)


def read_secret(settings: Settings) -> str:
    path = settings.cluster_secret_file
    return path.read_text(encoding="utf-8").strip() if path is not None else ""
