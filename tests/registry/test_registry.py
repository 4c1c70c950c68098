"""Leases, statuses and change values, on a clock the tests move (no sleeping)."""
from __future__ import annotations

import contextlib
import itertools
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.clock import FakeClock
from semreg.errors import NotFound
from semreg.rdf.terms import Tag
from semreg.registry import listing
from semreg.registry.environment_counts import tag_hashes
from semreg.registry.instances import BLOCKED, CRITICAL, DRAINING, STATUSES, UP, Registration
from semreg.registry.registry import Change, Registry
from semreg.registry.tag_union import distinct

T = Tag("http://x/A")


def reg(iid="a", ttl=10.0, dereg=30.0, **kw):
    return Registration(id=iid, service="svc", address="10.0.0.1", port=80, tags=(T,), ttl_s=ttl,
                        deregister_after_s=dereg, **kw)


@pytest.fixture
def clock():
    return FakeClock(monotonic=0.0, wall=1_800_000_000.0)


@pytest.fixture
def registry(clock):
    changes = []
    r = Registry(clock, on_change=changes.extend)
    r.changes = changes
    return r


def test_ttl_expiry_makes_critical_then_deletes(registry, clock):
    registry.put(reg(ttl=10, dereg=30))
    assert registry.next_deadline() == 10
    clock.advance(9.9)
    assert registry.expire() == []
    clock.advance(0.1)
    [c] = registry.expire()
    assert c.reason == "expired" and c.membership and c.status == CRITICAL and registry.get("a").status == CRITICAL
    assert registry.next_deadline() == 30  # deregister_after counts from the last heartbeat
    clock.advance(20)
    [c] = registry.expire()
    assert c.reason == "deleted" and c.removed and c.status is None
    with pytest.raises(NotFound):
        registry.get("a")
    assert registry.catalogue.holders == {}


def test_a_removal_that_leaves_a_tombstone_says_the_removals_revision_not_the_copys(registry, clock):
    """What a replica of every member's copies takes a removal's revision for (`semreg.cluster.replica_copies`):
    a copy newer than the one removed here, but older than the removal, is of the registration removed."""
    registry.put(reg("a", ttl=0), revision=5)
    registry.put(reg("b", ttl=10, dereg=30), revision=6)
    registry.delete("a", revision=9)
    assert registry.changes[-1].revision == 9 and registry.changes[-1].removed and registry.tombstones["a"][0] == 9
    clock.advance(10)
    registry.expire()  # b critical
    clock.advance(20)
    [c] = registry.expire(removal=lambda: 12)  # past deregister_after, on a shard that keeps tombstones
    assert c.reason == "deleted" and c.revision == 12 and registry.tombstones["b"][0] == 12
    registry.put(reg("c", ttl=0), revision=7)
    registry.delete("c")  # a node alone keeps no tombstone: the change says the copy it removed
    assert registry.changes[-1].revision == 7 and "c" not in registry.tombstones


def test_views_show_wall_times_and_leases_run_on_the_monotonic_clock(registry, clock):
    inst, _ = registry.put(reg(ttl=10))
    view = inst.view()
    assert view["registered_at"] == "2027-01-15T08:00:00.000Z"
    assert view["expires_at"] == "2027-01-15T08:00:10.000Z"
    clock.advance(4)
    assert registry.heartbeat("a").view()["expires_at"] == "2027-01-15T08:00:14.000Z"
    assert registry.next_deadline() == 14


def test_heartbeat_revives_a_critical_instance_and_renews(registry, clock):
    registry.put(reg(ttl=10))
    clock.advance(10)
    registry.expire()
    clock.advance(2)
    inst = registry.heartbeat("a", load=3)
    assert inst.status == UP and inst.expires_at == 22 and inst.load == 3
    assert registry.changes[-1].membership and registry.changes[-1].reason == "status"
    clock.advance(1)
    registry.heartbeat("a")
    assert not registry.changes[-1].membership  # a renewal alone changes no result


def test_ttl_zero_never_expires(registry, clock):
    registry.put(reg(ttl=0))
    clock.advance(1e12)
    assert registry.next_deadline() is None and registry.expire() == []


def test_deregister_after_zero_keeps_critical_instances(registry, clock):
    registry.put(reg(ttl=1, dereg=0))
    clock.advance(1)
    registry.expire()
    assert registry.next_deadline() is None and registry.get("a").status == CRITICAL


def test_admin_status_and_checks(registry):
    registry.put(reg(ttl=0))
    assert registry.heartbeat("a", status="draining").status == "draining"
    registry.set_check_result("a", False)
    assert registry.get("a").status == CRITICAL
    registry.set_check_result("a", True)
    assert registry.get("a").status == "draining"


def test_replace_keeps_registration_time_and_reindexes(registry, clock):
    registry.put(reg())
    clock.advance(4)
    inst, created = registry.put(Registration(id="a", service="other", address="h", port=1, tags=(Tag("http://x/B"),),
                                              environment="staging"))
    assert not created and inst.registered_at == 0 and inst.revision == 2
    assert set(registry.catalogue.holders) == {Tag("http://x/B")}
    assert registry.by_service == {"other": {"a"}} and registry.by_environment == {"staging": {"a"}}
    change = registry.changes[-1]
    assert change.reason == "replaced" and change.tags == {T, Tag("http://x/B")} and change.services == {"svc", "other"}
    assert change.environments == {"default", "staging"}


def test_changes_are_plain_values_that_cross_a_process(registry):
    registry.put(reg())
    registry.delete("a")
    registered, deregistered = registry.changes
    assert registered == Change("a", "registered", 1, UP, True, frozenset({T}), frozenset({"svc"}), frozenset({"default"}))
    assert deregistered.removed and deregistered.reason == "deregistered"
    assert pickle.loads(pickle.dumps(registry.changes)) == registry.changes


def test_routes_count_until_the_next_report(registry):
    registry.put(reg(ttl=0))
    registry.record_route("a")
    registry.record_route("a")
    assert registry.get("a").routes_since_report == 2
    registry.heartbeat("a", load=1)
    assert registry.get("a").routes_since_report == 0
    registry.record_route("gone")  # a route to an instance removed meanwhile is simply not counted


def test_restore_keeps_admin_status_revision_and_registration_time(registry):
    registry.put_many([reg("a"), reg("b")], [7, 9], admin_statuses=["draining", None],
                      registered_at_wall=[1_700_000_000.0, None])
    a, b = registry.get("a"), registry.get("b")
    assert (a.status, a.revision, b.status, b.revision) == ("draining", 7, UP, 9)
    assert a.view()["registered_at"] == "2023-11-14T22:13:20.000Z"


def test_heartbeat_unknown_is_not_found(registry):
    with pytest.raises(NotFound):
        registry.heartbeat("nope")


def test_leases_lapsing_at_once_are_handled_a_batch_at_a_time_until_none_is_due(registry, clock):
    for k in range(25):
        registry.put(reg(f"i{k:02d}", ttl=10))
    clock.advance(10)
    first = registry.expire(limit=10)
    assert len(first) == 10 and registry.next_deadline() == 10  # the rest are due still: the caller comes back
    rest = registry.expire(limit=10) + registry.expire(limit=10)
    assert len(rest) == 15 and registry.expire(limit=10) == []
    assert {c.id for c in first + rest} == {f"i{k:02d}" for k in range(25)}
    assert all(registry.get(f"i{k:02d}").status == CRITICAL for k in range(25))


def test_registrations_of_equal_tags_hold_one_copy_of_each_term(registry):
    """Each registration parses its own strings; once registered, equal terms are one object (a million
    instances of 3 tags over a few thousand terms held 9,000,000 strings), and the tags read back as given."""
    def parsed(iid):
        return Registration(id=iid, service="svc", address="10.0.0.1", port=80, tags=(Tag(
            "".join(["http://x/", "A"]), "".join(["http://x/", "p"]), "".join(["http://x/", "B"])),))

    first, _ = registry.put(parsed("a"))
    second, _ = registry.put(parsed("b"))
    assert second.reg.tags == (Tag("http://x/A", "http://x/p", "http://x/B"),)
    assert all(x is y for x, y in zip(first.reg.tags[0], second.reg.tags[0]))
    assert second.view()["tags"] == [{"s": "http://x/A", "p": "http://x/p", "o": "http://x/B"}]


IDS = st.sampled_from("abcde")
STEPS = st.lists(st.one_of(
    st.tuples(st.just("put"), IDS, st.sampled_from([0.0, 5.0]), st.sampled_from([None, UP, BLOCKED, DRAINING]),
              st.sampled_from(["s1", "s2"]), st.sampled_from(["default", "prod", "qa"]), st.sampled_from(["A", "B"])),
    st.tuples(st.just("heartbeat"), IDS, st.sampled_from([None, UP, BLOCKED, DRAINING])),
    st.tuples(st.just("check"), IDS, st.booleans()),
    st.tuples(st.just("state"), IDS, st.sampled_from([UP, BLOCKED, DRAINING]), st.booleans(), st.booleans()),
    st.tuples(st.just("delete"), IDS), st.tuples(st.just("drop"), IDS),
    st.tuples(st.just("advance"), st.sampled_from([1.0, 6.0, 40.0])), st.tuples(st.just("lease"), IDS, st.booleans()),
    st.tuples(st.just("place"), st.sampled_from(["", "ace", "abcde"]))), max_size=60)
SELECTIONS = [frozenset(c) for n in (1, 2, 3) for c in itertools.combinations(["default", "prod", "qa", "none"], n)]


@given(STEPS)
@settings(max_examples=300, deadline=None)
def test_counts_by_status_are_kept_exact_through_any_changes(steps):
    """The counts /metrics and an overview read are kept as instances change (a million instances were counted
    on every scrape); whatever happens to the instances and to where their leases run, they are what counting
    them gives: by status of every instance, and per environment of those whose lease runs here (what a
    member of a ring adds to an overview). The tags version stays put only while the distinct tags do."""
    clock = FakeClock(monotonic=0.0, wall=1_800_000_000.0)
    registry = Registry(clock)
    seen_tags: tuple[int, Any] = (-1, None)
    for step in steps:
        kind, *args = step
        absent = kind in ("heartbeat", "delete") and args[0] not in registry.instances
        with pytest.raises(NotFound) if absent else contextlib.nullcontext():  # only an absent id is not found
            if kind == "put":
                iid, ttl, status, service, environment, term = args
                registry.put_many([Registration(id=iid, service=service, address="h", port=1, ttl_s=ttl,
                                                deregister_after_s=10.0, environment=environment,
                                                tags=(Tag("http://x/" + term),))], admin_statuses=[status])
            elif kind == "heartbeat":
                registry.heartbeat(args[0], status=args[1])
            elif kind == "check":
                registry.set_check_result(args[0], args[1])
            elif kind == "state":
                iid, status, expired, passing = args
                inst = registry.instances.get(iid)
                if inst is not None:
                    registry.apply_state(iid, inst.revision, inst.state_version + 1, status, expired, passing)
            elif kind == "delete":
                registry.delete(args[0])
            elif kind == "drop":
                registry.drop(args[0])
            elif kind == "lease":
                registry.set_leased(args[0], args[1])
            elif kind == "place":  # where the leases of instances written from now on run
                registry.leases_here = lambda iid, here=args[0]: iid in here
            else:
                clock.advance(args[0])
                while registry.expire():  # a turn handles at most a batch: drain them all
                    continue
        counted = dict.fromkeys(STATUSES, 0)
        for inst in registry.instances.values():
            counted[inst.status] += 1
        assert registry.counts_by_status() == counted, step
        assert listing.alone(registry) == listing.counted(registry.instances.values(), None), step  # the overview
        leased = [inst for inst in registry.instances.values() if inst.leased]
        kept = registry.leased_counts
        for chosen in [*SELECTIONS, None]:  # an overview for a token bound to these environments, or for all
            want = listing.counted(leased, chosen)
            if chosen is not None:
                assert kept.summary(chosen, listing.STATUSES) == want, (step, chosen)
            tally = kept.tally(chosen, listing.STATUSES, tag_hashes(kept.tag_lists(chosen)))
            assert (tally.instances, tally.by_status, tally.services, tally.environments) == (
                want["instances"], want["by_status"], want["services"], want["environments"]), (step, chosen)
            assert distinct([tally.tags]) == want["tags"], (step, chosen)
        tags = {(inst.reg.environment, tag) for inst in leased for tag in inst.reg.tags}
        assert kept.tags_version != seen_tags[0] or tags == seen_tags[1], step
        seen_tags = (kept.tags_version, tags)
