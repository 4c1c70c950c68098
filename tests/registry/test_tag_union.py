"""A ring's distinct tags (`semreg.registry.tag_union`): the union of the members' tag hashes, whatever members
send again or say they hold as before, and counted again only when some member's tags moved."""
from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.rdf.terms import Tag
from semreg.registry import tag_union
from semreg.registry.environment_counts import Tally, tag_hashes
from semreg.registry.tag_union import KEPT, TagUnion

MEMBERS = ("a", "b", "c")


class Member:
    """A member as `LocalShard.counts` answers: its tags, a state moving with them, no hashes for a known state."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tags: set[str] = set()
        self.version = 0
        self.incarnation = 0
        self.sent = 0

    @property
    def state(self) -> str:
        return f"{self.name}{self.incarnation}:{self.version}"

    def counts(self, known: str | None) -> Tally:
        if known == self.state:
            return Tally({}, {}, {}, None, (), self.state)
        self.sent += 1
        return Tally({}, {}, {}, tag_hashes([[Tag(t) for t in self.tags]]), (), self.state)


def summary(union: TagUnion, members: dict[str, Member], environments: frozenset[str] | None = None,
            answering: tuple[str, ...] = MEMBERS) -> int:
    """What `listing.ring_counts` does with the union: ask with what it knows, ask again those it forgot."""
    answers = {m: members[m].counts(union.known(environments, m)) for m in answering}
    for m in union.missing(environments, answers):
        answers[m] = members[m].counts(None)
    return asyncio.run(union.count(environments, answers))


STEP = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(MEMBERS), st.sampled_from("pqrstuvw")),
    st.tuples(st.just("drop"), st.sampled_from(MEMBERS), st.sampled_from("pqrstuvw")),
    st.tuples(st.just("restart"), st.sampled_from(MEMBERS), st.just("")),
    st.tuples(st.just("silent"), st.sampled_from(MEMBERS), st.just("")),
    st.tuples(st.just("other environments"), st.integers(0, KEPT + 2), st.just("")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=30))
def test_the_count_is_the_union_of_the_members_tags_whatever_changed(steps):
    members = {m: Member(m) for m in MEMBERS}
    union = TagUnion()
    for kind, who, tag in steps:
        silent: tuple[str, ...] = ()
        if kind == "add" and tag not in members[who].tags:
            members[who].tags.add(tag)
            members[who].version += 1
        elif kind == "drop" and tag in members[who].tags:
            members[who].tags.discard(tag)
            members[who].version += 1
        elif kind == "restart":  # its versions count from 0 again: a new process, a new state
            members[who].incarnation += 1
            members[who].version = 0
        elif kind == "silent":
            silent = (who,)
        elif kind == "other environments":  # summaries of other environments: ours may be forgotten
            for n in range(who):
                summary(union, members, frozenset({f"e{n}"}))
        answering = tuple(m for m in MEMBERS if m not in silent)
        assert summary(union, members, answering=answering) == len(set().union(*(members[m].tags for m in answering)))


def test_a_summary_asked_again_with_no_tag_moved_has_no_member_send_its_hashes():
    members = {m: Member(m) for m in MEMBERS}
    for n, m in enumerate(MEMBERS):
        members[m].tags = {"shared", f"own{n}"}
    union = TagUnion()
    assert summary(union, members) == 4
    assert [members[m].sent for m in MEMBERS] == [1, 1, 1]
    assert summary(union, members) == 4
    assert [members[m].sent for m in MEMBERS] == [1, 1, 1]
    members["b"].tags.add("new")
    members["b"].version += 1
    assert summary(union, members) == 5
    assert [members[m].sent for m in MEMBERS] == [1, 2, 1]  # only the member whose tags moved


def test_a_large_union_is_made_in_a_worker_thread_and_equals_a_small_one(monkeypatch):
    members = {m: Member(m) for m in MEMBERS}
    for n, m in enumerate(MEMBERS):
        members[m].tags = {f"t{k}" for k in range(n * 1000, n * 1000 + 1500)}
    small = summary(TagUnion(), members)
    threads: list[object] = []
    real = asyncio.to_thread

    async def counted(fn, *args):
        threads.append(fn)
        return await real(fn, *args)
    monkeypatch.setattr(tag_union, "UNITED_AT_ONCE", 100)
    monkeypatch.setattr(tag_union.asyncio, "to_thread", counted)
    assert summary(TagUnion(), members) == small == 3500
    assert threads == [tag_union.distinct]


def test_hashes_forgotten_while_a_summary_was_asked_are_asked_for_again():
    """Between asking the members (saying what it holds) and counting, summaries of other environments can make
    the union forget this one's hashes: the members that sent none are then asked for them."""
    members = {m: Member(m) for m in MEMBERS}
    for n, m in enumerate(MEMBERS):
        members[m].tags = {"shared", f"own{n}"}
    union = TagUnion()
    assert summary(union, members) == 4
    answers = {m: members[m].counts(union.known(None, m)) for m in MEMBERS}
    assert all(a.tags is None for a in answers.values())
    for n in range(KEPT):  # meanwhile
        summary(union, members, frozenset({f"e{n}"}))
    assert union.missing(None, answers) == list(MEMBERS)
    for m in union.missing(None, answers):
        answers[m] = members[m].counts(None)
    assert asyncio.run(union.count(None, answers)) == 4
