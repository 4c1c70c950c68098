"""The node's start-up given up when a stop is asked meanwhile (at a million instances it takes a minute or
more, past the grace a supervisor gives a stop): nothing is left half open, and the records stay as they
were for the next start-up."""
from __future__ import annotations

import asyncio
import logging

from semreg.config import Settings
from semreg.node import Node
from semreg.registry import restore
from semreg.storage.store import Store


def records(store: Store, count: int) -> None:
    store.save_records([({"id": f"i{n}", "service": "svc", "address": "10.0.0.1", "port": 80 + n,
                          "tags": [["http://ex.org/A", "http://ex.org/p", f"http://ex.org/O{n}"]]}, n + 1)
                        for n in range(count)])


def test_a_stop_asked_while_instances_are_put_back_ends_the_start_up_and_the_next_one_has_them_all(
        monkeypatch, caplog):
    store = Store(None)
    records(store, 50)
    monkeypatch.setattr(restore, "BATCH", 10)
    node = Node(Settings(sparql=False), store=store)
    put_many = node.shard.registry.put_many

    def put_then_stop(*args, **kw):  # the server's signal handler, while the first batch goes in
        put_many(*args, **kw)
        node.stopping()

    monkeypatch.setattr(node.shard.registry, "put_many", put_then_stop)

    async def stopped() -> None:
        await node.start()
        assert not node.opened and not node.ready and len(node.shard.registry.instances) == 10
        await node.stop()

    with caplog.at_level(logging.INFO, logger="semreg"):
        asyncio.run(stopped())
    said = [(r.msg, getattr(r, "step", None)) for r in caplog.records if r.name == "semreg.node"]
    assert said == [("ontologies restored", None), ("start-up stopped: the server was asked to stop",
                                                    "putting the instances back stopped after 10 of 50"),
                    ("node stopped", None)]
    assert not [r for r in caplog.records if r.msg in ("instances restored", "node open")]
    again = Node(Settings(sparql=False), store=store)

    async def reopened() -> None:
        await again.start()
        assert again.opened and again.ready and sorted(again.shard.registry.instances) == sorted(
            f"i{n}" for n in range(50))
        await again.stop()

    asyncio.run(reopened())


def test_a_stop_asked_before_the_records_are_read_reads_none(monkeypatch):
    store = Store(None)
    records(store, 5)
    node = Node(Settings(sparql=False), store=store)
    node.stop_asked.set()  # a signal before the node knew its loop: the server's handler sets it directly
    read: list[int] = []
    load = store.load_records
    monkeypatch.setattr(store, "load_records", lambda *a: read.append(1) or load(*a))

    async def main() -> None:
        await node.start()
        assert not node.opened and not node.shard.registry.instances
        await node.stop()

    asyncio.run(main())
    assert read == []


def held(node: Node) -> dict:
    """What a restart must give back of each instance, and the tombstones."""
    return ({iid: (i.reg, i.revision, i.admin_status, i.registered_at_wall) for iid, i in
             node.shard.registry.instances.items()}, dict(node.shard.registry.tombstones))


def test_a_clean_stop_keeps_the_registry_and_the_next_start_up_reads_it_instead_of_the_records(tmp_path, caplog):
    """A node alone writes its snapshot last at a clean stop; the next start-up reads it while the records are
    unchanged, and the records again once anything wrote one."""
    from semreg.storage import snapshot

    path = tmp_path / "d"
    store = Store(path)
    store.save_records([({"id": f"i{n}", "service": "svc", "address": "10.0.0.1", "port": 80 + n, "ttl": 0,
                          "registered_at": 1_700_000_000.0 + n, "admin_status": "draining" if n % 3 else None,
                          "environment": "prod" if n % 2 else "default",
                          "tags": [["http://ex.org/A", "http://ex.org/p", f"http://ex.org/O{n % 4}"]]}, n + 1)
                        for n in range(30)])
    store.save_records([({"id": "gone", "deleted": True, "deleted_at": 4_000_000_000.0}, 99)])
    opened: list[tuple[Node, dict]] = []

    def start(store: Store) -> Node:
        node = Node(Settings(sparql=False), store=store)

        async def main() -> None:
            await node.start()
            opened.append((node, held(node)))
            await node.stop()

        asyncio.run(main())
        return node

    with caplog.at_level(logging.INFO, logger="semreg"):
        start(store)
        assert (path / snapshot.FILE).exists()
        start(store)
        store.save_records([({"id": "late", "service": "svc", "address": "h", "port": 1, "ttl": 0}, 200)])
        start(store)
    sources = [r.__dict__.get("from") for r in caplog.records if r.msg == "instance records read"]
    assert sources == ["records", "snapshot", "records"]
    first, second, third = (h for _, h in opened)
    assert len(first[0]) == 30 and first[1] == {"gone": (99, 4_000_000_000.0)}
    assert second == first  # from the snapshot: each registration, revision, status and first registration
    assert third[0].keys() == first[0].keys() | {"late"} and {k: third[0][k] for k in first[0]} == first[0]


def services_of(node: Node) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.name, s.needs) for s in node.manager.services]


def test_a_node_alone_is_the_list_of_its_services_and_what_it_was_started_without_is_not_in_it(tmp_path):
    bare = Node(Settings(data_dir=None, sparql=False, stall_log_s=0))
    assert [name for name, _ in services_of(bare)] == ["loop lag", "store", "knowledge", "registry", "tombstones",
                                                       "memory", "open", "tokens"]
    full = Node(Settings(data_dir=tmp_path / "d", dns="127.0.0.1:0"))
    assert [name for name, _ in services_of(full)] == [
        "loop lag", "stall watch", "store", "replica", "knowledge", "registry", "rdf writer", "tombstones", "memory",
        "open", "query pool", "tokens", "dns"]
    assert dict(services_of(full))["knowledge"] == ("store", "replica")
    assert full.replica is not None and full.at_rest is not None and full.dns is not None and full.cluster is None


def test_a_ring_member_listening_joins_once_its_cluster_listener_listens_and_drains_its_public_port_first(tmp_path):
    from semreg.clock import FakeClock
    from semreg.cluster.kv import MemoryKV

    secret = tmp_path / "secret"
    secret.write_text("a-secret-of-more-than-sixteen-characters\n")
    settings = Settings(data_dir=None, etcd="memory", node_id="n1", advertise="http://127.0.0.1:9081",
                        cluster_listen="127.0.0.1:9081", cluster_secret_file=secret)
    clock = FakeClock()
    member = Node(settings, clock=clock, kv=MemoryKV(clock), listen=True)
    names = [name for name, _ in services_of(member)]
    assert names == ["loop lag", "stall watch", "store", "replica", "knowledge", "registry", "memory", "open",
                     "query pool", "tokens", "cluster listener", "membership", "public listener"]
    needs = dict(services_of(member))
    assert needs["membership"] == ("registry", "cluster listener")
    assert set(needs["public listener"]) == set(names) - {"public listener"}  # it stops first: the drain comes first
    in_process = Node(settings, clock=clock, kv=MemoryKV(clock))  # a test serves its apps: it joins at once
    assert [name for name, _ in services_of(in_process)][-2:] == ["tokens", "membership"]
    assert dict(services_of(in_process))["membership"] == ("registry",)
