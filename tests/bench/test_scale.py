"""The scale scenario end to end at a smoke size: every figure it reports is read off a real server."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.paths import ROOT

from semreg.bench.scenarios import SCENARIOS, default_names


def test_scale_runs_only_when_named_and_has_its_targets():
    assert "scale" in SCENARIOS and "scale" not in default_names()
    names = [t.label for t in SCENARIOS["scale"].targets]
    assert names == ["PSS an instance, whole tree", "start-up to ready", "start-up to ready after kill -9",
                     "longest stall as leases lapse"]


@pytest.mark.timeout(300)
@pytest.mark.process
@pytest.mark.parametrize("sparql", [True, False], ids=["sparql", "no-sparql"])
def test_quick_scale_reports_memory_speed_expiry_and_start_up(sparql):
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--quick", "--only", "scale", "--instances", "3000",
                           "--json", *(() if sparql else ("--no-sparql",))],
                          cwd=ROOT, capture_output=True, text=True, timeout=290, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    scale = json.loads(done.stdout)["scenarios"]["scale"]
    assert "error" not in scale, scale["error"]
    assert scale["instances"] == 3000 and scale["register_per_s"] > 0 and scale["sparql"] is sparql
    memory, empty = scale["memory"], scale["memory_empty"]
    # a server started --no-sparql has no template nor query processes, before and after its restart
    assert memory["server_pss_mib"] > 0 and (memory["template_pss_mib"] > 0) is sparql
    assert (scale["memory_restarted"]["template_pss_mib"] > 0) is sparql
    assert memory["total_pss_mib"] > empty["total_pss_mib"] and scale["pss_total_per_instance_kib"] > 0
    for figure in ("hot_discovery", "cold_discovery", "register_1000_tags"):
        assert scale[figure]["n"] > 0 and scale[figure]["median_ms"] > 0
    if sparql:  # every example query answered, none past the endpoint's time limit at this size
        queries = {k: v for k, v in scale["sparql_queries"].items() if k != "after_a_write"}
        assert len(queries) == 6 and not any(q["past_time_limit"] or q["rows"] is None for q in queries.values())
    assert scale["heartbeats"]["per_s"] > 0 and scale["heartbeats"]["failed"] == 0
    assert scale["expiry"]["expired"] == 10_000 and scale["expiry"]["max_ms"] > 0
    assert scale["startup_s"] > 0 and scale["memory_restarted"]["total_pss_mib"] > 0
    # each start-up (after SIGTERM, then after SIGKILL) split by the started server's own log, each step after the
    # one before and before /readyz; the killed server's records were all there again (else the run fails)
    for startup, split in (("startup_s", "startup_phases_s"), ("startup_after_kill_s", "startup_after_kill_phases_s")):
        phases = scale[split]
        assert list(phases) == ["store opened", "ontologies restored", "instance records read", "instances restored",
                                "node open"]
        assert list(phases.values()) == sorted(phases.values()) and phases["node open"] <= scale[startup]
    assert [t["met"] in (True, False) for t in scale["targets"]] == [True, True, True, True]
