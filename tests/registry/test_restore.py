"""Instances come back from their records in batches: every one of them, the event loop turning between
batches, with progress in the log; tombstones are kept or expired by their age, unreadable records skipped."""
from __future__ import annotations

import asyncio
import logging

from semreg.clock import FakeClock
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
