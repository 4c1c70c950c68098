"""A data directory's files are read once at start-up when they fit in half the available memory, and left
alone otherwise; a real store's directory, opened by a node, is read before its records."""
from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

import pytest

from semreg.config import Settings
from semreg.node import Node
from semreg.storage import warm
from semreg.storage.store import Store

MEMINFO = """MemTotal:       24683832 kB
MemFree:        21004404 kB
MemAvailable:   23614000 kB
Buffers:            9516 kB
"""


def test_the_available_memory_is_read_from_meminfo():
    assert warm.available_memory(MEMINFO) == 23614000 * 1024
    assert warm.available_memory("MemTotal: 1 kB\n") is None
    assert warm.available_memory("MemAvailable: lots kB\n") is None


def test_tables_that_fit_in_half_the_available_memory_are_read_every_byte(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.sst").write_bytes(b"x" * (warm.CHUNK + 10))  # more than one read
    (tmp_path / "sub" / "b.sst").write_bytes(b"y" * 100)
    (tmp_path / "LOCK").write_bytes(b"")
    (tmp_path / "LOG").write_bytes(b"z" * 1000)
    total = warm.CHUNK + 110
    assert [p.name for p, _ in warm.files_of(tmp_path)] == ["a.sst", "b.sst"]  # tables only, largest first
    assert warm.warm(tmp_path, available=2 * total) == total


@pytest.mark.process
def test_the_store_stays_locked_to_its_server_once_its_files_are_read(tmp_path):
    """RocksDB's lock on its directory is a POSIX lock, gone once the process closes any descriptor of the
    LOCK file: another process must still be refused the directory after the warming."""
    store = Store(tmp_path / "data")
    store.save_records([({"id": "i1", "service": "svc", "address": "10.0.0.1", "port": 80, "tags": []}, 1)])
    store.flush()
    assert warm.warm(tmp_path / "data", available=1 << 40) > 0
    other = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path\n"
                            "from semreg.storage.store import Store, StoreError\n"
                            "try:\n    Store(Path(sys.argv[1]))\nexcept StoreError as exc:\n    print(exc); sys.exit(3)",
                            str(tmp_path / "data")], capture_output=True, text=True, timeout=60, check=False)
    assert other.returncode == 3 and "in use by another process" in other.stdout, other.stdout + other.stderr


def test_files_larger_than_half_the_available_memory_are_left_to_be_read_as_needed(tmp_path, caplog):
    (tmp_path / "a.sst").write_bytes(b"x" * 1000)
    with caplog.at_level(logging.INFO, logger="semreg.store"):
        assert warm.warm(tmp_path, available=1999) == 0
        assert warm.warm(tmp_path, available=2000) == 1000
    left = [r for r in caplog.records if r.msg == "store files left to be read as needed"]
    assert len(left) == 1 and left[0].bytes == 1000 and left[0].available == 1999


def test_without_a_figure_for_the_available_memory_nothing_is_read(tmp_path, monkeypatch):
    (tmp_path / "a.sst").write_bytes(b"x" * 10)
    monkeypatch.setattr(warm, "_system_available", lambda: None)
    assert warm.warm(tmp_path) == 0


def test_a_file_gone_while_it_is_read_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "a.sst").write_bytes(b"x" * 10)
    (tmp_path / "b.sst").write_bytes(b"y" * 20)
    listed = warm.files_of(tmp_path)
    monkeypatch.setattr(warm, "files_of", lambda directory: listed)
    (tmp_path / "a.sst").unlink()  # compacted away between the listing and the read
    assert warm.warm(tmp_path, available=1 << 30) == 20


def test_a_node_on_a_data_directory_reads_its_files_as_it_opens(tmp_path, caplog):
    store = Store(tmp_path / "data")
    store.save_records([({"id": "i1", "service": "svc", "address": "10.0.0.1", "port": 80, "tags": []}, 1)])
    store.flush()
    node = Node(Settings(data_dir=tmp_path / "data", sparql=False), store=store)

    async def main() -> None:
        await node.start()
        assert sorted(node.shard.registry.instances) == ["i1"]
        await node.stop()

    with caplog.at_level(logging.INFO, logger="semreg.store"):
        asyncio.run(main())
    read = [r for r in caplog.records if r.msg == "store files read into memory"]
    assert len(read) == 1 and read[0].bytes > 0 and read[0].files > 0
