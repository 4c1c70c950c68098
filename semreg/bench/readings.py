"""What the bench reads off processes: resident and proportional memory, children and command lines and
open-files limits from /proc, this process's own open-files limit, a server's Prometheus text and the
details of its JSON log.

The parsers (`vmrss_bytes`, `pss_bytes`, `max_open_files`, `parse_metrics`, `log_details`, `log_milestones`)
are pure; the readers around them answer None when there is nothing to read (no pid, not Linux, the process gone).
"""
from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator


# -- this process's open-files limit ---------------------------------------------------------------------
def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft limit on open files to the hard one; (soft, hard) after."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft, hard


def open_files_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# -- another process, from /proc/<pid> -------------------------------------------------------------------
def vmrss_bytes(status_text: str) -> int | None:
    """The resident set size in bytes from the text of /proc/<pid>/status (`VmRSS:  370220 kB`)."""
    found = re.search(r"^VmRSS:\s+(\d+)\s*kB\s*$", status_text, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else None


def process_rss_bytes(pid: int | None) -> int | None:
    """A process's resident set size, or None (no pid, not Linux, gone)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as status:
            return vmrss_bytes(status.read())
    except OSError:
        return None


def pss_bytes(smaps_rollup_text: str) -> int | None:
    """The proportional set size in bytes from the text of /proc/<pid>/smaps_rollup (`Pss:  567 kB`):
    shared pages counted once over the processes sharing them, so a tree's PSS sums without double counting."""
    found = re.search(r"^Pss:\s+(\d+)\s*kB\s*$", smaps_rollup_text, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else None


def process_pss_bytes(pid: int | None) -> int | None:
    """A process's proportional set size, or None (no pid, not Linux, gone, or not ours to read)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return pss_bytes(rollup.read())
    except OSError:
        return None


def parent_pid(stat_text: str) -> int | None:
    """The parent's pid from the text of /proc/<pid>/stat (after the command name, which may hold spaces)."""
    fields = stat_text.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def child_pids(pid: int) -> list[int]:
    """The live children of `pid`, from every /proc/<n>/stat ([] when there is no /proc)."""
    import os

    children = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if parent_pid(stat.read()) == pid:
                    children.append(int(entry))
        except OSError:
            continue
    return sorted(children)


def command_line(pid: int) -> list[str]:
    """A process's argv from /proc/<pid>/cmdline ([] when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return [part.decode(errors="replace") for part in cmdline.read().split(b"\0") if part]
    except OSError:
        return []


def max_open_files(limits_text: str) -> int | None:
    """The soft `Max open files` from the text of /proc/<pid>/limits (None when unlimited or absent)."""
    found = re.search(r"^Max open files\s+(\d+)\s+", limits_text, re.MULTILINE)
    return int(found.group(1)) if found else None


def process_open_files_limit(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/limits") as limits:
            return max_open_files(limits.read())
    except OSError:
        return None


# -- a semreg server's metrics and log -------------------------------------------------------------------
def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text → {series as printed (`name{label="v"}`): value}; comments skipped."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            series[name.strip()] = float(value)
        except ValueError:
            continue
    return series


def _log_records(log_text: str, messages: tuple[str, ...]) -> Iterator[dict]:
    """The lines of a semreg JSON log whose `msg` is one of `messages`, parsed (other lines skipped)."""
    import json

    for line in log_text.splitlines():
        if not any(m in line for m in messages):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("msg") in messages:
            yield record


def log_details(log_text: str, message: str, limit: int = 5) -> dict[str, int]:
    """In a semreg JSON log, the `detail` of the lines whose `msg` is `message`, most frequent first."""
    details: Counter[str] = Counter(str(r.get("detail"))[:200] for r in _log_records(log_text, (message,)))
    return dict(details.most_common(limit))


def log_milestones(log_text: str, messages: tuple[str, ...], since: float) -> dict[str, float]:
    """In a semreg JSON log, the seconds from `since` (wall, epoch seconds) to the last line of each of
    `messages` logged at or after it: how a start-up's time splits. A message not logged since is left out."""
    import datetime as dt

    seen: dict[str, float] = {}
    for record in _log_records(log_text, messages):
        try:
            at = dt.datetime.fromisoformat(record["ts"]).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        if at >= since - 0.001:  # the log's times are cut to the millisecond
            seen[record["msg"]] = round(at - since, 2)
    return {m: seen[m] for m in messages if m in seen}


# -- CPU time, from /proc/<pid>/stat -----------------------------------------------------------------------
def cpu_ticks(stat_text: str) -> int | None:
    """utime + stime + cutime + cstime (clock ticks) from the text of /proc/<pid>/stat: the CPU of the process
    and of the children it has waited for (fields after the command name, which may hold spaces)."""
    fields = stat_text.rpartition(")")[2].split()
    try:
        return sum(int(fields[n]) for n in (11, 12, 13, 14))
    except (IndexError, ValueError):
        return None


def tree_cpu_seconds(pid: int | None) -> float | None:
    """The CPU seconds of a process and of every live descendant (each with the children it waited for), or
    None when the process is gone or there is no /proc."""
    import os

    if pid is None:
        return None
    ticks, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/stat") as stat:
                mine = cpu_ticks(stat.read())
        except OSError:
            mine = None
        if mine is None:
            if current == pid:
                return None
            continue
        ticks += mine
        todo.extend(child_pids(current))
    return ticks / os.sysconf("SC_CLK_TCK")
