"""Balancing choices as tables (API.md, Routing)."""
from __future__ import annotations

import collections
import math

import pytest

from semreg.errors import BadRequest
from semreg.registry.balancer import LEAST_LOAD, ROUND_ROBIN, SPILLOVER, Candidate, choose, parse_policy, priority_of


def hand_out(policy, cands, n, limit=False):
    """Route n times, counting each route against the chosen instance as the server does."""
    state = {c.id: c for c in cands}
    got = collections.Counter()
    for k in range(n):
        c = choose(policy, list(state.values()), limit=limit, counter=k)
        if c is None:
            got[None] += 1
            continue
        got[c.id] += 1
        state[c.id] = Candidate(c.id, c.weight, c.load, c.routes_since_report + 1, c.capacity, c.priority)
    return got


def test_weights_40_20_20_20_give_4_2_2_2():
    cands = [Candidate(f"w{n}", w, 0, 0) for n, w in enumerate([40, 20, 20, 20])]
    assert hand_out(LEAST_LOAD, cands, 10) == {"w0": 4, "w1": 2, "w2": 2, "w3": 2}


@pytest.mark.parametrize("loads, expected", [
    ([(1, 0, 0), (1, 5, 0)], "a"),        # lower reported load wins
    ([(1, 0, 3), (1, 2, 0)], "b"),        # routes since the report count as load
    ([(1, 1, 0), (3, 3, 0)], "b"),        # (1+1)/1 = 2 > (3+1)/3
    ([(2, 1, 0), (2, 1, 0)], "a"),        # ties go to the id
])
def test_least_load_effective_load(loads, expected):
    cands = [Candidate(name, w, load, routes) for name, (w, load, routes) in zip("ab", loads)]
    assert choose(LEAST_LOAD, cands, limit=False).id == expected


def test_spillover_fills_by_priority_then_spills():
    cands = [Candidate("low", 1, 0, 0, capacity=2, priority=2), Candidate("high", 1, 0, 0, capacity=3, priority=1),
             Candidate("none", 1, 0, 0, capacity=None)]
    got = hand_out(SPILLOVER, cands, 7)
    assert got == {"high": 3, "low": 2, "none": 2}


def test_spillover_when_all_full_picks_most_room_or_none_with_limit():
    cands = [Candidate("a", 1, 5, 0, capacity=5, priority=1), Candidate("b", 1, 10, 0, capacity=20, priority=2)]
    cands[1] = Candidate("b", 1, 20, 0, capacity=20, priority=2)
    assert choose(SPILLOVER, cands, limit=False).id == "b"
    assert choose(SPILLOVER, cands, limit=True) is None


def test_limit_excludes_full_instances():
    cands = [Candidate("a", 10, 4, 0, capacity=4), Candidate("b", 1, 0, 0, capacity=1)]
    assert choose(LEAST_LOAD, cands, limit=True).id == "b"
    assert hand_out(LEAST_LOAD, cands, 3, limit=True) == {"b": 1, None: 2}


def test_round_robin_cycles_in_id_order():
    cands = [Candidate(x, 1, 0, 0) for x in "cab"]
    assert [choose(ROUND_ROBIN, cands, limit=False, counter=k).id for k in range(4)] == ["a", "b", "c", "a"]


def test_no_candidates():
    assert choose(LEAST_LOAD, [], limit=False) is None


@pytest.mark.parametrize("text, expected", [(None, (LEAST_LOAD, False)), ("limit", (LEAST_LOAD, True)),
                                            ("spillover", (SPILLOVER, False)), ("round-robin", (ROUND_ROBIN, False))])
def test_parse_policy(text, expected):
    assert parse_policy(text) == expected


def test_parse_policy_rejects_unknown():
    with pytest.raises(BadRequest):
        parse_policy("random")


def test_priority_parsing():
    assert priority_of({"priority": "2"}) == 2 and priority_of({}) == math.inf and priority_of({"priority": "x"}) == math.inf
