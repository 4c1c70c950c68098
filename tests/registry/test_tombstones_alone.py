"""A node alone forgets tombstones once they are past their keep (in a ring, hand-off passes do): under
steady churn they no longer pile up until the next restart. Nor does it keep a change log, which only other
members read."""
from __future__ import annotations

from support.inprocess import InProcess

from semreg.node import TRIM_EVERY_S
from semreg.registry.local_shard import TOMBSTONE_KEEP_S


def three_and_a_removal(server: InProcess):
    """A client of `server`, which holds i0-i2 and has removed i0."""
    c = server.client()
    for n in range(3):
        assert c.put(f"/v1/instances/i{n}", json={"service": "s", "address": "h", "port": 1, "ttl": 0}).status_code == 201
    assert c.delete("/v1/instances/i0").status_code == 204
    return c


def test_tombstones_past_their_keep_are_forgotten_while_the_node_runs():
    server = InProcess().start()
    try:
        c = three_and_a_removal(server)
        shard = server.node.shard
        assert server.call(lambda: set(shard.registry.tombstones)) == {"i0"}
        server.call(lambda: server.clock.advance(TOMBSTONE_KEEP_S / 2))
        assert c.delete("/v1/instances/i1").status_code == 204
        server.call(lambda: server.clock.advance(TOMBSTONE_KEEP_S / 2 + TRIM_EVERY_S))
        assert server.call(lambda: set(shard.registry.tombstones)) == {"i1"}  # i0's keep is over, i1's not
        server.call(lambda: server.clock.advance(TOMBSTONE_KEEP_S / 2 + TRIM_EVERY_S))
        assert server.call(lambda: set(shard.registry.tombstones)) == set()
        server.run(server.node.write(lambda: None))  # the store's writes before it are done
        assert set(server.node.store.revisions()) == {"i2"}  # their records went too
        assert [i["id"] for i in c.get("/v1/instances").json()] == ["i2"]
    finally:
        server.stop()


def test_a_node_alone_keeps_no_change_log():
    """The log kept the last 10,000 changes, and every removed instance in them, for followers a node alone
    never has."""
    server = InProcess().start()
    try:
        three_and_a_removal(server)
        assert server.call(lambda: server.node.changelog.since(0)) == (False, [])
    finally:
        server.stop()
