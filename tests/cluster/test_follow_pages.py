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
