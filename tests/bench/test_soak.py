"""The soak scenario: the memory readings off /proc, the per-minute table and its growth from fake readings,
the churn's requests, and a one-minute run at --quick sizes."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from support.paths import ROOT

from semreg.bench import configure
from semreg.bench.dataset import Dataset
from semreg.bench.readings import child_pids, command_line, parent_pid, process_pss_bytes, pss_bytes
from semreg.bench.scenarios import SCENARIOS, default_names
from semreg.bench.scenarios.soak import (
    QUICK_LOAD,
    SoakLoad,
    churn_request,
    growth,
    minute_row,
    render,
    server_heap,
    sparql_request,
    tree_kinds,
    trend,
)
from semreg.bench.settings import from_args

MIB = 1024 * 1024


def _settings(*argv: str):
    parser = argparse.ArgumentParser()
    configure(parser)
    return from_args(parser.parse_args(list(argv)), tuple(SCENARIOS))


@pytest.mark.process
def test_pss_and_the_process_tree_from_proc():
    rollup = ("55762b243000-7ffc0e698000 ---p 00000000 00:00 0                          [rollup]\n"
              "Rss:                1728 kB\nPss:                 567 kB\nPss_Dirty:           112 kB\n")
    assert pss_bytes(rollup) == 567 * 1024
    assert pss_bytes("Rss:   1728 kB\n") is None
    assert parent_pid("4242 (python -m x) S 17 4242 4242 0 -1 4194304") == 17  # a name with spaces and parens
    assert process_pss_bytes(os.getpid()) > 0 and process_pss_bytes(None) is None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in child_pids(os.getpid())
        assert command_line(child.pid)[1:] == ["-c", "import time; time.sleep(30)"]
    finally:
        child.kill()
        child.wait()
    assert command_line(child.pid) == []


def test_the_kinds_of_process_are_told_by_parentage_and_command_line():
    tree = {1: [2, 3], 2: [4, 5], 3: [6]}
    argv = {2: ["python", "-m", "semreg.sparql.worker", "/tmp/s"], 3: ["python", "-c", "other"]}
    kinds = tree_kinds(1, lambda pid: tree.get(pid, []), lambda pid: argv.get(pid, []))
    assert kinds == {"server": [1], "template": [2], "queries": [4, 5]}


def _memory(server: float, template: float, queries: float, n: int = 2) -> dict[str, tuple[int, int, int]]:
    return {"server": (int(server * MIB), int(2 * server * MIB), 1), "template": (int(template * MIB), 0, 1),
            "queries": (int(queries * MIB), int(queries * MIB), n)}


def test_the_trend_compares_the_means_of_five_minutes_so_a_saw_tooth_is_flat():
    saw = [minute_row(m, _memory(200, 50 + 10 * (m % 5), 80), 3000) for m in range(31)]  # rebuilt every 5 min
    assert growth(saw)["growth_pct"] == pytest.approx(100 * 0 / 330)  # minutes 5 and 30: same phase by luck
    assert growth(saw[:29])["growth_pct"] == pytest.approx(100 * 30 / 330, abs=0.1)  # minute 28: the top
    flat = trend(saw[:29])
    assert flat is not None and flat["growth_pct"] == 0.0
    assert (flat["from_minutes"], flat["to_minutes"]) == ([5, 9], [24, 28])
    rising = trend([minute_row(m, _memory(200 + m, 50, 80), 3000) for m in range(31)])
    assert rising is not None and rising["from_mib"] == 337.0 and rising["to_mib"] == 358.0
    assert trend([minute_row(m, _memory(200, 50, 80), 3000) for m in range(14)]) is None  # windows overlap
    assert trend([minute_row(m, _memory(200, 50, 80), 3000) for m in range(15)]) is not None


def test_the_table_per_minute_and_the_growth_from_minute_five():
    rows = [minute_row(m, _memory(200 + 2 * m, 50, 80 + m), 3000 + m % 2) for m in range(11)]
    assert rows[0] == {"minute": 0, "server_pss_mib": 200.0, "template_pss_mib": 50.0, "queries_pss_mib": 80.0,
                       "total_pss_mib": 330.0, "server_rss_mib": 400.0, "template_rss_mib": 0.0,
                       "queries_rss_mib": 80.0, "total_rss_mib": 480.0, "query_processes": 2, "instances": 3000}
    total = growth(rows)
    assert (total["from_minute"], total["to_minute"], total["from_mib"], total["to_mib"]) == (5, 10, 345.0, 360.0)
    assert total["growth_mib"] == 15.0 and total["mib_per_min"] == 3.0 and total["growth_pct"] == pytest.approx(4.3)
    assert growth(rows, "template_pss_mib")["growth_pct"] == 0.0
    short = growth(rows[:4])  # shorter than five minutes: from minute 1
    assert (short["from_minute"], short["to_minute"], short["growth_mib"]) == (1, 3, 6.0)
    assert growth(rows[:2])["mib_per_min"] == 0.0
    header, *lines = render({"per_minute": rows[:2]})
    assert header[0] == "minute" and lines[1] == ["1", "3,001", "202.0", "50.0", "81.0 (2)", "333.0", "485.0", "0",
                                                  "0 / 0 / 0"]
    counted = [{**row, "heartbeats": 1000 * row["minute"] ** 2} for row in rows[:3]]
    assert [line[-2] for line in render({"per_minute": counted})[1:]] == ["0", "1,000", "3,000"]  # in each minute
    heaped = {**rows[1], **server_heap({"semreg_python_allocated_blocks": 1_234_567.0,
                                       'semreg_malloc_bytes{state="in_use"}': 300 * MIB,
                                       'semreg_malloc_bytes{state="free_kept"}': 12.5 * MIB})}
    assert render({"per_minute": [heaped]})[1][-1] == "1234.6 / 300.0 / 12.5"


def test_the_load_keeps_about_a_thousand_heartbeats_a_second_and_three_thousand_live():
    load = SoakLoad()
    assert load.churn_window == 50 and load.beating == 2950 and load.period_s == pytest.approx(2.95)
    assert load.beating / load.period_s == pytest.approx(1000.0)
    assert QUICK_LOAD.beating / QUICK_LOAD.period_s == pytest.approx(100.0)


def test_churn_registers_new_tags_and_removes_them_a_window_later():
    live = Dataset(classes=300, properties=20, instances=290, tags_per_instance=3, answer_size=10, seed=7)
    make = churn_request(live, SoakLoad(churn_per_s=1.0))  # a window of 10
    method, target, body = make(0)
    assert (method, target) == ("PUT", "/v1/instances/bench-soak-churn-0000000")
    sent = json.loads(body)
    assert sent["ttl"] == 15 and len(sent["tags"]) == 3 and "id" not in sent
    assert make(1) is None  # nothing to remove while the window fills
    assert make(21) == ("DELETE", "/v1/instances/bench-soak-churn-0000000", None)
    assert json.loads(make(2)[2])["tags"] != sent["tags"]
    queries = {sparql_request(300)(k)[1] for k in range(2000)}
    assert len(queries) == 2000  # a new SPARQL query every time


def test_settings_minutes_and_soak_only_when_named():
    assert _settings().minutes == 30 and _settings("--quick").minutes == 1
    assert _settings("--quick", "--minutes", "6").minutes == 6
    with pytest.raises(ValueError, match="--minutes must be at least 1"):
        _settings("--minutes", "0")
    assert "soak" in SCENARIOS and "soak" not in default_names()
    assert default_names() == [name for name in SCENARIOS if name not in (
        "at-rest", "soak", "scale", "scale-ring", "no-sparql", "noisy-neighbour", "noisy-neighbour-ring")]
    assert [t.path for t in SCENARIOS["soak"].targets] == ["growth_pct"]


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.process
def test_quick_soak_reads_every_kind_of_process_for_a_minute():
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--quick", "--only", "soak", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=230, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    soak = json.loads(done.stdout)["scenarios"]["soak"]
    assert "error" not in soak, soak["error"]
    assert [row["minute"] for row in soak["per_minute"]] == [0, 1]
    last = soak["per_minute"][-1]
    assert last["server_pss_mib"] > 0 and last["template_pss_mib"] > 0 and last["total_pss_mib"] > 0
    assert last["python_kblocks"] > 10 and last["c_heap_in_use_mib"] > 1  # read off the server's /metrics
    assert 250 <= last["instances"] <= 320
    assert soak["heartbeats_ok"] > 0 and soak["heartbeats_failed"] == 0 and soak["errors_5xx"] == 0
    assert soak["requests"].get("sparql 2xx", 0) > 0 and soak["requests"].get("churn 2xx", 0) > 0
    assert isinstance(soak["growth_pct"], float) and soak["targets"][0]["met"] in (True, False)
    assert soak["heartbeats_per_s"] > 50 and isinstance(soak["failures"], dict) and soak["heartbeat_lateness"]["n"] > 0
