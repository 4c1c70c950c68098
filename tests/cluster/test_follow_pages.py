"""A member far behind another's change log reads it a page at a time (`semreg.registry.changelog.PAGE`),
oldest first, and catches up to its end: one answer of the whole log held a loaded follower's event loop
for seconds, past its membership lease. Nodes as apps in this process, on one fake clock."""
from __future__ import annotations

import pytest
from support.inprocess_ring import InProcessRing
from support.ring import body
from support.server import wait_for

from semreg.registry.changelog import PAGE


@pytest.mark.slow  # four pages of registrations through a ring of three
def test_a_follower_reads_a_long_log_a_page_at_a_time_and_reaches_its_end(in_ring: InProcessRing) -> None:
    n1, n2, _ = (in_ring.add(name) for name in ("n1", "n2", "n3"))
    in_ring.upload(n1)
    for start in range(0, 4 * PAGE, 500):  # two thirds of them on n1 (k=2 of 3)
        r = n1.request("POST", "/v1/instances/batch", json={"instances": [body(n) for n in range(start, start + 500)]})
        assert r.status_code == 200, r.text
    secret = {"X-Semreg-Cluster": in_ring.secret.read_text().strip()}
    head = in_ring.call(lambda: n1.node.changelog.cursor)
    assert head > 2 * PAGE

    cursor, pages, seen = 0, 0, []
    while cursor < head:
        r = n1.internal_request("GET", "/internal/v1/changes", params={"after": cursor, "wait": 0}, headers=secret)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert not answer["reset"] and 0 < len(answer["changes"]) <= PAGE
        assert answer["cursor"] == cursor + len(answer["changes"])
        seen += [c[0] for c in answer["changes"]]
        cursor, pages = answer["cursor"], pages + 1
    assert pages == -(-head // PAGE) and set(seen) == set(in_ring.run(n1.node.shard.inventory()))

    def followed() -> bool:
        in_ring.settle()
        return in_ring.call(lambda: n2.cluster.followers._followed.get("n1", (0, 0))[1]) == head
    wait_for(followed, 30, "n2 following n1's log to its end")


def test_a_member_back_on_a_quiet_ring_is_no_longer_suspected_once_it_answers(in_ring: InProcessRing) -> None:
    """A member that stopped answering is suspected; back, with nothing written since, its followers' first
    question is answered at once (where its log is), not held as a long poll for its next change, so the
    suspicion clears in the follower's backoff, not in the long poll's 20 s."""
    a, b = in_ring.add("a"), in_ring.add("b")
    in_ring.run(b.stop_listening())
    in_ring.advance(1.0)
    wait_for(lambda: "b" in in_ring.call(lambda: a.cluster.membership.suspects), 20, "a suspecting b")
    in_ring.run(b.listen())
    waited = 0.0
    while "b" in in_ring.call(lambda: a.cluster.membership.suspects):
        assert waited < 10.0, "b still suspected after 10 s of the ring's clock with nothing written"
        in_ring.advance(0.5)
        waited += 0.5
