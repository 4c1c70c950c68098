"""Instances come back from their records in batches: every one of them, the event loop turning between
batches, with progress in the log; tombstones are kept or expired by their age, unreadable records skipped."""
from __future__ import annotations

import asyncio
import logging

import pytest

from semreg.clock import FakeClock
from semreg.errors import StopAsked
from semreg.rdf.terms import Tag
from semreg.registry import restore
from semreg.registry.instances import Registration
from semreg.registry.registry import Registry

EX = "http://ex.org/"


def record(n: int, **extra) -> dict:
    reg = Registration(id=f"i{n}", service="svc", address="10.0.0.1", port=80 + n,
                       tags=(Tag(EX + f"C{n % 4}", EX + "p", EX + "O"),))
    return {**reg.record(), **extra}


def test_records_are_sorted_out_by_kind_and_age():
    records = [(record(0, registered_at=5.0, admin_status="draining"), 3), (record(1, admin_status="bogus"), 2),
               ({"id": "gone-old", "deleted": True, "deleted_at": 10.0}, 7),
               ({"id": "gone-new", "deleted": True, "deleted_at": 500.0}, 8),
               ({"id": "broken", "service": "svc"}, 1)]  # no address nor port: skipped
    out = restore.sort_out(records, keep_after=100.0)
    assert [r.id for r in out.regs] == ["i0", "i1"] and out.revisions == [3, 2]
    assert out.statuses == ["draining", None] and out.walls == [5.0, None]
    assert out.regs[0].tags == (Tag(EX + "C0", EX + "p", EX + "O"),)
    assert out.tombstones == {"gone-new": (8, 500.0)} and out.expired == ["gone-old"]


def test_registrations_go_back_in_batches_the_loop_turning_between_them(monkeypatch, caplog):
    monkeypatch.setattr(restore, "BATCH", 4)
    monkeypatch.setattr(restore, "PROGRESS_S", 0.0)
    registry = Registry(FakeClock())
    recorded = restore.sort_out([(record(n), n + 1) for n in range(10)], keep_after=0.0)
    seen: list[int] = []

    async def main() -> None:
        async def watch() -> None:  # what the loop runs meanwhile (a timer, a thread's reply) sees them arrive
            while len(seen) < 3:
                seen.append(len(registry.instances))
                await asyncio.sleep(0)
        watching = asyncio.ensure_future(watch())
        await restore.put_back(registry, recorded)
        await watching

    with caplog.at_level(logging.INFO, logger="semreg.shard"):
        asyncio.run(main())
    assert sorted(registry.instances) == sorted(f"i{n}" for n in range(10))
    assert [registry.instances[f"i{n}"].revision for n in range(10)] == list(range(1, 11))
    assert seen == [4, 8, 10]  # a turn after each batch
    assert [(r.done, r.of) for r in caplog.records if r.msg == "restoring instances"] == [(4, 10), (8, 10)]


def test_a_stop_asked_while_the_records_are_sorted_out_or_put_back_ends_it_at_the_next_look(monkeypatch):
    monkeypatch.setattr(restore, "BATCH", 4)
    monkeypatch.setattr(restore, "STOP_EVERY", 3)
    records = [(record(n), n + 1) for n in range(10)]
    looks: list[int] = []

    def stop_at(look: int):
        looks.clear()
        return lambda: looks.append(len(looks)) or len(looks) == look

    with pytest.raises(StopAsked, match="sorting the instance records out stopped after 3"):
        restore.sort_out(records, keep_after=0.0, stopped=stop_at(2))
    recorded = restore.sort_out(records, keep_after=0.0, stopped=stop_at(0))
    assert len(looks) == 4 and len(recorded.regs) == 10  # looked before records 0, 3, 6 and 9
    registry = Registry(FakeClock())
    with pytest.raises(StopAsked, match="stopped after 8 of 10"):
        asyncio.run(restore.put_back(registry, recorded, stopped=stop_at(3)))
    assert sorted(registry.instances) == sorted(f"i{n}" for n in range(8))  # two whole batches, the third not begun


def test_records_read_at_once_share_one_string_a_term():
    """Each record decoded from JSON has strings of its own; the registrations sorted out of many share one a
    term, service, scheme and environment, and are equal to those each record holds."""
    import orjson

    records = [(orjson.loads(orjson.dumps(record(n, environment="prod"))), 1) for n in range(8)]
    out = restore.sort_out(records, keep_after=0.0)
    assert out.regs == [Registration.from_record(rec) for rec, _ in records]
    first, later = out.regs[0], out.regs[4]  # the same tag: C0 p O
    assert all(a is b for a, b in zip(first.tags[0], later.tags[0]))
    assert out.regs[1].tags[0].p is first.tags[0].p and out.regs[1].tags[0].o is first.tags[0].o
    for field in ("service", "scheme", "environment"):
        assert getattr(first, field) is getattr(later, field)


def test_a_record_whose_tag_is_not_three_terms_is_skipped():
    bad = {**record(1), "tags": [["http://ex.org/only-two", "http://ex.org/p"]]}
    out = restore.sort_out([(record(0), 1), (bad, 1)], keep_after=0.0)
    assert [r.id for r in out.regs] == ["i0"]


def test_a_registration_with_every_field_set_comes_back_from_its_record_as_it_was():
    """Each field differs from its default and from the others, so a field read into the wrong place shows."""
    import dataclasses

    import orjson

    reg = Registration(id="every", service="svc", address="10.0.0.9", port=8443, scheme="https",
                       tags=(Tag(EX + "A", EX + "p", EX + "B"), Tag(EX + "C", EX + "q", "x")), weight=7, capacity=40,
                       ttl_s=12.5, deregister_after_s=600.0, check={"http": "/health", "interval": 5},
                       meta={"zone": "b"}, owner="team-a", environment="staging")
    assert all(getattr(reg, f.name) != f.default for f in dataclasses.fields(reg) if f.default is not dataclasses.MISSING)
    for terms in (None, {}):
        back = Registration.from_record(orjson.loads(orjson.dumps(reg.record())), terms)
        assert back == reg and dataclasses.astuple(back) == dataclasses.astuple(reg)


def every_field(iid: str, **changes) -> Registration:
    return Registration(**{**dict(id=iid, service="svc", address="10.0.0.9", port=8443, scheme="https",
                                  tags=(Tag(EX + "A", EX + "p", EX + "B"), Tag(EX + "C", EX + "q", "x")), weight=7,
                                  capacity=40, ttl_s=12.5, deregister_after_s=600.0,
                                  check={"http": "/health", "interval": 5}, meta={"zone": "b"}, owner="team-a",
                                  environment="staging"), **changes})


def held_registry() -> tuple[Registry, dict[str, int]]:
    """A registry as a node alone holds it, and its records' revisions: instances with every field set, one
    draining, tags shared between some, a tombstone kept and one past its keep."""
    clock = FakeClock(monotonic=0.0, wall=1_800_000_000.0)
    registry = Registry(clock)
    regs = [every_field("a"), every_field("b", port=1, tags=()), every_field("c", environment="prod", check=None),
            Registration(id="d", service="other", address="h", port=2)]
    registry.put_many(regs, [11, 12, 13, 14], admin_statuses=[None, "draining", None, "blocked"],
                      registered_at_wall=[1_700_000_000.5, None, 1_600_000_000.0, None])
    registry.delete("x", revision=20)  # a removal of an instance held elsewhere: its tombstone only
    clock.advance(10)
    registry.delete("d", revision=21)
    registry.tombstones["old"] = (5, 1_000.0)  # removed long ago: past its keep
    return registry, {"a": 11, "b": 12, "c": 13, "x": 20, "d": 21, "old": 5}


def test_a_snapshot_gives_back_what_the_records_give():
    """`from_snapshot` of `snapshot_of` is `sort_out` of the records the same registry wrote (the start-up reads
    either): registrations, revisions, statuses, first registrations, tombstones kept and past their keep."""
    import marshal

    registry, revisions = held_registry()
    records = [(inst.durable(), inst.revision) for inst in registry.instances.values()]
    records += [({"id": iid, "deleted": True, "deleted_at": at}, rev) for iid, (rev, at) in registry.tombstones.items()]
    keep_after = 1_500_000_000.0
    from_records = restore.sort_out(records, keep_after)
    payload, why = restore.snapshot_of(registry, revisions)
    assert why == "" and payload is not None
    back = restore.from_snapshot(marshal.loads(marshal.dumps(payload)), keep_after)
    assert back is not None
    recorded, read_revisions = back
    assert read_revisions == revisions
    assert recorded.regs == from_records.regs and recorded.revisions == from_records.revisions
    assert recorded.statuses == from_records.statuses == [None, "draining", None]
    assert recorded.walls == from_records.walls
    assert recorded.tombstones == from_records.tombstones and recorded.expired == from_records.expired == ["old"]
    assert recorded.regs[0].tags is recorded.regs[2].tags  # equal tags come back as one shared tuple
    assert isinstance(recorded.regs[0].tags[0], Tag)


def test_no_snapshot_when_the_registry_is_not_exactly_its_records():
    registry, revisions = held_registry()
    assert restore.snapshot_of(registry, {**revisions, "a": 99}) == (
        None, "instance a is at revision 11 here, 99 in the records")
    assert restore.snapshot_of(registry, {**revisions, "y": 3}) == (
        None, "the records hold y at revision 3, which is neither an instance nor a tombstone here")
    assert restore.snapshot_of(registry, {**revisions, "d": 22})[0] is None  # a tombstone at another revision
    payload, _ = restore.snapshot_of(registry, revisions)
    assert restore.from_snapshot({**payload, "fields": payload["fields"][:-1]}, 0.0) is None  # another version's
    assert restore.from_snapshot(["not", "a", "payload"], 0.0) is None


def test_a_snapshot_that_cannot_be_made_or_used_leaves_the_records_to_do_it(monkeypatch, caplog, tmp_path):
    """Neither a snapshot of this version's form whose rows are not as written (read: the records are read
    instead) nor a failure to write one (a full disk: the stop goes on) stops a start-up or a stop."""
    from semreg.storage import snapshot
    from semreg.storage.store import Store

    store = Store(tmp_path / "d")
    store.save_records([(record(n), n + 1) for n in range(3)])

    async def write(fn, *args):
        return fn(*args)

    monkeypatch.setattr(snapshot, "take", lambda store: {"fields": restore.FIELDS, "tag_sets": [], "live": [("x",)],
                                                         "tombstones": []})
    with caplog.at_level(logging.INFO, logger="semreg.shard"):
        recorded = asyncio.run(restore.read(store, write, keep_after=0.0))
    assert sorted(r.id for r in recorded.regs) == ["i0", "i1", "i2"] and recorded.newest == 3
    said = [(r.msg, r.__dict__.get("from")) for r in caplog.records]
    assert said[0][0] == "registry snapshot not used: the instance records are read instead"
    assert said[1] == ("instance records read", "records")

    def full(store, payload):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot, "save", full)
    registry = Registry(FakeClock())
    registry.put_many(recorded.regs, recorded.revisions)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="semreg.shard"):
        asyncio.run(restore.keep(registry, store, write))
    assert [r.msg for r in caplog.records] == ["registry snapshot not written: the next start-up reads the records"]
    assert "No space left" in caplog.records[0].why
