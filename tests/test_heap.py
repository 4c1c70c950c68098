"""The collector kept out of the way: what piles up is frozen before a full collection has to walk it."""
from __future__ import annotations

import contextlib
import gc

from semreg import heap
from semreg.heap import HeapSettler, paused


def _frozen(objects: list[list[int]]) -> bool:
    """Whether every one of `objects` sits in the permanent generation, out of every collection's walk.

    `gc.get_objects()` lists the three collected generations only. The process-wide freeze count is not
    a measure here: it drops whenever a frozen object of another test is freed."""
    collected = {id(o) for o in gc.get_objects()}
    return not any(id(o) in collected for o in objects)


def test_objects_made_by_registrations_are_frozen_once_enough_piled_up():
    settler = HeapSettler(every=1000)
    kept = [[n] for n in range(500)]  # long-lived, tracked by the collector
    settler.note(600)
    assert settler.freezes == 0 and not _frozen(kept) and not _frozen([kept])
    kept += [[n] for n in range(500)]
    settler.note(600)
    assert settler.freezes == 1
    assert _frozen(kept)  # a full collection no longer walks them
    settler.note(600)
    assert settler.freezes == 1  # counting starts again after a freeze
    settler.settled()
    settler.note(999)
    assert settler.freezes == 1
    fresh = [[n] for n in range(10)]
    assert not _frozen(fresh)


def test_the_collector_is_paused_for_a_restore_and_comes_back_after_the_last_of_overlapping_ones():
    assert gc.isenabled()
    first, second = paused(), paused()
    first.__enter__()
    assert not gc.isenabled()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second restore is still going
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_pause_leaves_a_collector_switched_off_elsewhere_off():
    gc.disable()
    try:
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_comes_back_when_a_restore_fails():
    with contextlib.suppress(RuntimeError), paused():
        raise RuntimeError("the data directory is unreadable")
    assert gc.isenabled()


def test_a_node_restores_its_instances_frozen_before_the_collector_comes_back(monkeypatch):
    """Once back on after a restore's pause, the collector's first collection was a full one: it walked every
    restored object (~3.5 s at a million instances). They are frozen before it can run."""
    import asyncio

    from semreg.config import Settings
    from semreg.node import Node
    from semreg.storage.store import Store

    store = Store(None)
    store.save_records([({"id": f"i{n}", "service": "svc", "address": "10.0.0.1", "port": 80 + n,
                          "tags": [["http://ex.org/A", "http://ex.org/p", f"http://ex.org/O{n}"]]}, 1)
                        for n in range(50)])
    node = Node(Settings(sparql=False), store=store)
    seen: list[tuple[int, bool]] = []
    enable = gc.enable

    def enabled() -> None:  # what the collector would find, at the moment it is switched back on
        instances = list(node.shard.registry.instances.values())
        seen.append((len(instances), _frozen([*instances, *(i.reg for i in instances)])))
        enable()

    async def main() -> None:
        monkeypatch.setattr(gc, "enable", enabled)
        try:
            await node.start()
        finally:
            monkeypatch.setattr(gc, "enable", enable)
        await node.stop()

    asyncio.run(main())
    assert gc.isenabled() and seen[-1] == (50, True)  # (an earlier pause, the ontologies', had none to freeze)


def test_a_node_serving_no_sparql_freezes_its_registrations_as_they_pile_up():
    """The SPARQL replica's feed told the collector of what it published; a node without one (`--no-sparql`)
    froze nothing after its start-up, and its full collections walked every instance registered since, with
    Python's lock held (150,000 instances registered in process: 37 full collections, the longest 564 ms,
    7.1 s in all; with this, 2, the longest 32 ms)."""
    import asyncio

    import httpx

    from semreg.config import Settings
    from semreg.node import Node
    from semreg.storage.store import Store

    node = Node(Settings(sparql=False), store=Store(None))
    app = node.app

    async def main() -> None:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://node") as http:
            for batch in range(2):
                items = [{"id": f"i{batch}-{k}", "service": "svc", "address": "10.0.0.1", "port": 1 + k,
                          "tags": [f"<http://ex.org/C{k % 300}> <http://ex.org/p> <http://ex.org/O{j}>"
                                   for j in range(3)]} for k in range(1000)]
                answer = await http.post("/v1/instances/batch", json={"instances": items})
                assert answer.status_code == 200 and answer.json()["registered"] == 1000, answer.text[:300]
            first = [inst.reg for iid, inst in node.shard.registry.instances.items() if iid.startswith("i0-")]
            assert node.memory.heap.freezes >= 1 and len(first) == 1000 and _frozen(first)

    asyncio.run(main())


def test_making_many_pauses_the_collector_and_freezes_what_it_made():
    import gc

    assert gc.isenabled()
    with heap.making(10):
        assert gc.isenabled()  # a few registrations: nothing changes
    frozen = gc.get_freeze_count()
    with heap.making(heap.MAKING_AT_ONCE):
        assert not gc.isenabled()
        made = [[n] for n in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(made)
