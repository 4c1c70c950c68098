"""The scale-ring scenario end to end at a smoke size: three real members and a real etcd on loopback ports."""
from __future__ import annotations

import pytest
from support.bench_runs import quick_bench

from semreg.bench.scenarios import SCENARIOS, default_names


def test_scale_ring_runs_only_when_named_and_has_its_targets():
    assert "scale-ring" in SCENARIOS and "scale-ring" not in default_names()
    assert SCENARIOS["scale-ring"].needs == ("etcd",)
    assert [t.label for t in SCENARIOS["scale-ring"].targets] == ["PSS of the largest member", "answers differing"]


@pytest.mark.timeout(300)
@pytest.mark.process
def test_quick_scale_ring_reports_members_answers_and_a_restart():
    ring = quick_bench("scale-ring", "--instances", "2000", timeout_s=290)
    assert ring["instances"] == 2000 and ring["members"] == 3 and ring["replicas"] == 2
    assert sum(ring["records_per_member"].values()) == 2 * 2000  # each record on two members
    memory = ring["memory"]
    assert memory["n1"]["template_pss_mib"] > 0  # the first member serves SPARQL ...
    assert memory["n2"]["template_pss_mib"] == memory["n3"]["template_pss_mib"] == 0  # ... the others forward
    assert ring["largest_member_pss_mib"] == max(m["total_pss_mib"] for m in memory.values())
    assert ring["answers"]["differing"] == 0 and ring["answers"]["compared"] == 3 * 200 + 3
    assert ring["summary"]["first_ms"] > 0 and ring["summary"]["partial"] is False
    for figure in ("hot_discovery", "cold_discovery", "register_1000_tags", "summary"):
        assert ring[figure]["n"] > 0 and ring[figure]["median_ms"] > 0
    assert ring["heartbeats"]["per_s"] > 0 and ring["heartbeats"]["failed"] == 0
    assert ring["restart"]["startup_s"] > 0 and ring["restart"]["records"] > 0
    phases = ring["restart"]["startup_phases_s"]  # the member's own log: opened, read back, then ready in the ring
    assert list(phases) == ["store opened", "ontologies restored", "instance records read", "instances restored",
                            "node open", "node ready"]
    assert list(phases.values()) == sorted(phases.values()) and phases["node ready"] <= ring["restart"]["startup_s"]
    assert [t["met"] for t in ring["targets"]] == [True, True]
