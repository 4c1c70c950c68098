"""`semreg backup` and `semreg restore` against real servers (README, Backup and restore): a restored server
answers as the one backed up; a registry that holds something is refused with a word about --force; a cut
file is refused before anything is sent, naming the line; no progress noise when stderr is not a terminal."""
from __future__ import annotations

import gzip

import httpx
import pytest
from support.backups import HEAD, TAG_LINE, answers, backup_ids, gzip_bomb, semreg
from support.ring import load, upload

from semreg.storage.backup import encode

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


def test_a_restore_past_a_limit_is_refused_by_the_command_before_anything_is_sent(in_process, tmp_path):
    server = in_process()
    url = server.listen()
    c = server.client()
    assert c.put("/v1/instances/kept", json={"service": "k", "address": "10.3.0.1", "port": 3, "ttl": 0}).status_code == 201
    bomb = tmp_path / "bomb.nq.gz"
    bomb.write_bytes(gzip_bomb(TAG_LINE, 1 << 30))
    refused = semreg("restore", str(bomb), "--url", url, "--force", "--restore-inflated-limit", str(64 << 20))
    assert refused.returncode == 1, refused.stderr
    assert "inflates to more than 67108864 bytes" in refused.stderr and "--restore-inflated-limit" in refused.stderr
    assert "nothing was restored" in refused.stderr
    long = tmp_path / "long.nq.gz"
    long.write_bytes(gzip.compress(HEAD + TAG_LINE + b'<urn:semreg:instance:x> <https://w3id.org/semreg#service> "'
                                   + b"x" * (17 << 20) + b'" <urn:semreg:registry> .\n', compresslevel=1))
    refused = semreg("restore", str(long), "--url", url, "--force")
    assert refused.returncode == 1, refused.stderr
    assert "line 3 of the backup is longer than 16777216 bytes" in refused.stderr and "--restore-line-limit" in refused.stderr
    assert [i["id"] for i in c.get("/v1/instances").json()] == ["kept"]


def test_a_server_with_lower_limits_refuses_what_the_command_let_through(in_process, tmp_path):
    server = in_process(restore_line_limit_bytes=4096)
    url = server.listen()
    wide = {"id": "wide", "service": "s" * 5000, "address": "10.0.0.1", "port": 80, "scheme": "http", "tags": [],
            "weight": 1, "capacity": None, "ttl": 0.0, "check": None, "owner": None, "environment": "default",
            "deregister_after": 90.0, "meta": {}}
    path = tmp_path / "wide.nq.gz"
    path.write_bytes(b"".join(encode([(wide, 1)], [], {}, 1764580000.0)))
    refused = semreg("restore", str(path), "--url", url)
    assert refused.returncode == 1, refused.stderr
    assert "of the backup is longer than 4096 bytes" in refused.stderr and "--restore-line-limit" in refused.stderr
    assert server.client().get("/v1/instances").json() == []
