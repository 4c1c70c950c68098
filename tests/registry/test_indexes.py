"""Indexes by scope (`semreg.registry.indexes`) and the change feed numbered by them (`semreg.registry.feed`): a
reader's index moves with the changes it may see and with nothing else, never goes back, and the feed answers
it exactly the changes of its environments after the number it holds. Pure, on a fake clock."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.clock import FakeClock
from semreg.registry.feed import ChangeFeed
from semreg.registry.indexes import Indexes, scope_of
from semreg.registry.registry import Change

ENVIRONMENTS = ("prod", "staging", "dev", "qa")
SCOPES = [None, frozenset(), frozenset({"staging"}), frozenset({"staging", "dev"}), frozenset({"prod"})]


def change(iid: str, *environments: str) -> Change:
    return Change(iid, "registered", 1, "up", True, frozenset(), frozenset({"svc"}), frozenset(environments))


@pytest.mark.parametrize("environment, scope", [("*", None), ("staging", frozenset({"staging"}))])
def test_the_scope_of_a_read(environment, scope):
    assert scope_of(environment) == scope


def test_each_scope_counts_its_own_changes_and_those_of_everything():
    indexes = Indexes(100)
    indexes.changed({"prod"})
    indexes.changed({"prod"})
    indexes.changed({"staging", "prod"})  # an instance moved from one to the other
    indexes.changed_everything()
    assert [indexes.of(s) for s in SCOPES] == [104, 101, 102, 102, 104]


def test_a_result_that_changed_without_a_counted_change_still_moves():
    indexes = Indexes(100)
    for scope in SCOPES:
        since = indexes.of(scope)
        assert indexes.moved(scope, since) > since
        assert indexes.moved(scope, since - 1) == indexes.of(scope)  # already past: unchanged


steps = st.lists(st.one_of(st.just(None), st.frozensets(st.sampled_from(ENVIRONMENTS), max_size=2)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(changes=steps, most=st.integers(1, 5))
def test_an_index_never_goes_back_and_moves_only_with_its_scope_while_nothing_is_forgotten(changes, most):
    indexes = Indexes(1_000, most=most)
    seen: set[str] = set()
    for touched in changes:
        before = [indexes.of(s) for s in SCOPES]
        if touched is None:
            indexes.changed_everything()
        else:
            indexes.changed(touched)
            seen |= touched
        after = [indexes.of(s) for s in SCOPES]
        assert all(a >= b for a, b in zip(after, before))
        if len(seen) <= most:  # no environment forgotten yet
            for scope, b, a in zip(SCOPES, before, after):
                expected = 1 if scope is None or touched is None else len(scope & touched)
                assert a - b == expected, (scope, touched)


@settings(max_examples=200, deadline=None)
@given(changes=st.lists(st.frozensets(st.sampled_from(ENVIRONMENTS), min_size=1, max_size=2), max_size=40),
       scope=st.sampled_from(SCOPES), held_at=st.integers(0, 40))
def test_the_feed_answers_a_reader_exactly_the_changes_of_its_scope_after_its_number(changes, scope, held_at):
    feed = ChangeFeed(FakeClock(), keep=64)
    held = None
    for n, touched in enumerate(changes):
        if n == held_at:
            held = feed.index(scope)
        feed.append([change(f"i{n}", *touched)])
    if held is None:
        held, held_at = feed.index(scope), len(changes)
    reset, found = feed.since(held, scope, most=1_000)
    expected = [f"i{n}" for n, touched in enumerate(changes)
                if n >= held_at and (scope is None or scope & touched)]
    assert not reset and [c.id for c in found] == expected
    assert feed.since(feed.index(scope), scope) == (False, [])


def test_a_reader_behind_a_reset_or_past_the_log_reads_everything_again():
    feed = ChangeFeed(FakeClock(), keep=4)
    staging = frozenset({"staging"})
    start = feed.index(staging)
    feed.append([change("a", "staging")])
    held = feed.index(staging)
    feed.reset()
    assert feed.since(held, staging) == (True, [])
    after_reset = feed.index(staging)
    assert feed.since(after_reset, staging) == (False, [])
    for n in range(5):
        feed.append([change(f"b{n}", "staging")])
    assert feed.since(after_reset, staging) == (True, [])  # the log kept only the last 4
    assert feed.since(start - 1, staging) == (True, []) and feed.since(feed.index(staging) + 1, staging) == (True, [])


def test_renewals_are_not_in_the_feed_and_do_not_move_it():
    feed = ChangeFeed(FakeClock())
    before = feed.index(frozenset({"staging"}))
    feed.append([replace(change("a", "staging"), membership=False)])
    assert feed.index(frozenset({"staging"})) == before and feed.index() == before


def test_a_reader_of_a_forgotten_environment_reads_everything_again_and_its_index_never_goes_back():
    feed = ChangeFeed(FakeClock())
    feed.indexes.most = 2
    staging = frozenset({"staging"})
    feed.append([change("a", "staging")])
    held = feed.index(staging)
    for n, environment in enumerate(("prod", "prod", "prod", "dev", "qa")):  # staging forgotten, then prod (3)
        feed.append([change(f"b{n}", environment)])
    assert feed.index(staging) > held  # it counts as much as prod had: forward, never back
    assert feed.since(held, staging) == (True, [])
    feed.append([change("c", "staging")])
    now = feed.index(staging)
    feed.append([change("d", "staging")])
    assert feed.since(now, staging) == (False, [change("d", "staging")])
