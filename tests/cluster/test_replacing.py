"""Before a registration with a token that is not an admin's replaces an instance, the node asks who
registered it: only the owners of each id (the placement knows them), not every member of the ring. The
guarantee stays: a token may not replace another token's instance, a removal newer than every copy frees the
id, and an owner that does not answer is stood in for by the next member clockwise; with no owner answering,
the write is refused for now and nothing is written.

Rings of apps in this process (`support.inprocess_ring`); each node's shard counts the asks it answers.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.inprocess_ring import InProcessRing, RingNode

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
TOKENS = {"tokens": [{"name": "alice", "token": ALICE, "scopes": ["read", "write"]},
                     {"name": "bob", "token": BOB, "scopes": ["read", "write"]}]}


def body(iid: str, port: int = 10000) -> dict[str, Any]:
    return {"id": iid, "service": "svc", "address": "127.0.0.1", "port": port, "tags": [], "ttl": 0}


def register(node: RingNode, token: str, iid: str, port: int = 10000) -> Any:
    return node.put(f"/v1/instances/{iid}", json=body(iid, port), headers={"Authorization": f"Bearer {token}"})


def owned_by(node: RingNode, owners: list[str], prefix: str = "i", skip: int = 0) -> str:
    """An instance id whose owners on `node`'s ring are `owners`, in that order."""
    ring = node.cluster.ring
    found = (i for i in (f"{prefix}{n}" for n in range(10_000)) if ring.owners(i, 2) == owners)
    for _ in range(skip):
        next(found)
    return next(found)


def count_asks(ring: InProcessRing) -> Counter[str]:
    """Count, per node, the asks of who registered an instance its shard answers (from this node or another)."""
    asks: Counter[str] = Counter()
    for name, node in ring.nodes.items():
        shard = node.node.shard
        answer = shard.registered_by

        async def counted(ids: list[str], name: str = name, answer: Any = answer) -> Any:
            asks[name] += 1
            return await answer(ids)
        ring.call(lambda shard=shard, counted=counted: setattr(shard, "registered_by", counted))
    return asks


def new_ring(path: Path, names: str) -> InProcessRing:
    tokens = path / "tokens.json"
    path.mkdir(parents=True, exist_ok=True)
    tokens.write_text(json.dumps(TOKENS))
    ring = InProcessRing(path / "ring")
    for name in names:
        ring.add(name, tokens_file=tokens)
    assert ring.converged()
    return ring


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessRing]:
    ring = new_ring(tmp_path_factory.mktemp("replacing"), "abcd")
    try:
        yield ring
    finally:
        ring.close()


@pytest.fixture
def three(tmp_path: Path) -> Iterator[InProcessRing]:
    ring = new_ring(tmp_path, "abc")
    try:
        yield ring
    finally:
        ring.close()


def test_a_registration_asks_the_owners_of_its_id_and_no_other_member(four: InProcessRing) -> None:
    a, b = four.nodes["a"], four.nodes["b"]
    asks = count_asks(four)
    iid = owned_by(a, ["b", "c"])
    assert register(a, ALICE, iid).status_code == 201  # through a member that owns nothing of it
    assert asks == Counter({"b": 1, "c": 1})
    asks.clear()
    assert register(b, ALICE, iid, port=10001).status_code == 200  # through its first owner: its own part in process
    assert register(b, BOB, iid).status_code == 403
    assert asks == Counter({"b": 2, "c": 2})


def test_a_batch_asks_each_owner_once(four: InProcessRing) -> None:
    a = four.nodes["a"]
    asks = count_asks(four)
    ids = [owned_by(a, ["b", "c"], "batch"), owned_by(a, ["b", "c"], "batch", skip=1), owned_by(a, ["c", "d"], "batch")]
    r = a.request("POST", "/v1/instances/batch", json={"instances": [body(iid) for iid in ids]},
                  headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text
    assert asks == Counter({"b": 1, "c": 1, "d": 1})


@pytest.mark.parametrize("down", [0, 1], ids=["first owner down", "second owner down"])
def test_another_token_may_not_replace_an_instance_while_one_of_its_owners_is_down(three: InProcessRing,
                                                                                  down: int) -> None:
    a = three.nodes["a"]
    owners = ["b", "c"]
    iid = owned_by(a, owners)
    assert register(a, ALICE, iid).status_code == 201
    three.run(three.nodes[owners[down]].stop_listening())
    r = register(a, BOB, iid)
    assert r.status_code == 403 and "registered by another token" in r.json()["error"], r.text
    assert register(a, ALICE, iid, port=10001).status_code == 200  # its owner still may
    three.run(three.nodes[owners[1 - down]].stop_listening())  # now no owner answers: nothing is decided
    r = register(a, BOB, iid)
    assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1 and "try again" in r.json()["error"], r.text


def test_a_removal_newer_than_a_copy_frees_the_id_for_another_token(four: InProcessRing) -> None:
    a, b, c = four.nodes["a"], four.nodes["b"], four.nodes["c"]
    iid = owned_by(a, ["b", "c"], "freed")
    assert register(a, ALICE, iid).status_code == 201
    revision = four.call(lambda: c.node.shard.held(iid).revision)
    assert four.run(b.node.shard.delete_record(iid, revision + 1))  # one owner took the removal; c holds the copy
    assert register(a, BOB, iid).status_code in (200, 201)  # the newest of what the owners hold is the removal
    assert register(a, ALICE, iid).status_code == 403  # and now the id is bob's
