"""Processes as /proc shows them: a process's fields, and the tree of processes below one."""
from __future__ import annotations

import os
from pathlib import Path


def stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def tree(root: int) -> list[int]:
    """`root` and every process below it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = stat(int(entry))
            if fields is not None:
                parents[int(entry)] = int(fields[1])
    out, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        out += frontier
    return out
