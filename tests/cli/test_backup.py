"""`semreg backup` and `semreg restore` against real servers (README, Backup and restore): a restored server
answers as the one backed up; a registry that holds something is refused with a word about --force; a cut
file is refused before anything is sent, naming the line; no progress noise when stderr is not a terminal."""
from __future__ import annotations

import httpx
import pytest
from support.backups import answers, backup_ids, semreg
from support.ring import load, upload

pytestmark = pytest.mark.process


def test_a_backup_restores_by_the_command_line_and_a_cut_one_is_refused(start_server, tmp_path):
    source, target = start_server(), start_server()
    with httpx.Client(base_url=source.url, timeout=30) as c:
        upload(c)
        load(c)
        assert c.put("/v1/prefixes/zz", json={"iri": "http://zz.example/"}).status_code == 201
        before = answers(c)
    path = tmp_path / "registry.nq.gz"
    done = semreg("backup", str(path), "--url", source.url)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("backed up 294 instances, 1 ontologies, 1 prefixes and 0 saved queries to ")
    assert not path.with_name(path.name + ".part").exists() and len(backup_ids(path)) == 294
    restored = semreg("restore", str(path), "--url", target.url)
    assert restored.returncode == 0 and restored.stderr == "", restored.stderr
    assert restored.stdout.startswith("restored 294 instances, 1 ontologies, 1 prefixes and 0 saved queries from ")
    with httpx.Client(base_url=target.url, timeout=30) as t:
        after = answers(t)
        assert after == before
        assert t.get("/v1/prefixes").json()["zz"] == "http://zz.example/"

    again = semreg("restore", str(path), "--url", target.url)
    assert again.returncode == 1 and "not empty" in again.stderr and "--force" in again.stderr

    cut = tmp_path / "cut.nq.gz"
    cut.write_bytes(path.read_bytes()[:-40])
    refused = semreg("restore", str(cut), "--url", target.url, "--force")
    assert refused.returncode == 1, refused.stderr
    assert "ends early after line" in refused.stderr and "nothing was restored" in refused.stderr
    with httpx.Client(base_url=target.url, timeout=30) as t:
        assert answers(t) == after


def test_a_missing_file_or_registry_is_said_plainly(tmp_path):
    missing = semreg("restore", str(tmp_path / "nope.nq.gz"), "--url", "http://127.0.0.1:9")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    unreachable = semreg("backup", str(tmp_path / "b.nq.gz"), "--url", "http://127.0.0.1:9", "--timeout", "2")
    assert unreachable.returncode == 3 and not (tmp_path / "b.nq.gz").exists()
    assert not (tmp_path / "b.nq.gz.part").exists()
