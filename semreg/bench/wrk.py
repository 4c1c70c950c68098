"""Running `wrk` (the HTTP load generator) and reading its report.

Every throughput figure of `semreg bench` comes from wrk with the same threads, connections and
duration for every peer, so the ratios compare servers and not clients. POST bodies and extra
headers go through a generated Lua script. `parse()` reads wrk 4's text report (`--latency`).
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from semreg.bench.peers import BenchError, find_tool

_TIME_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
_SIZE_B = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_NUMBER = r"([0-9.]+|-?nan|inf)"


@dataclass(frozen=True)
class WrkSettings:
    threads: int = 2
    connections: int = 32
    duration_s: int = 10
    timeout_s: int = 2  # wrk's own per-request timeout; a request past it counts as a timeout error

    def argv(self) -> list[str]:
        threads = max(1, min(self.threads, self.connections))  # wrk refuses fewer connections than threads
        return [f"-t{threads}", f"-c{self.connections}", f"-d{self.duration_s}s", "--timeout", f"{self.timeout_s}s",
                "--latency"]


@dataclass(frozen=True)
class WrkResult:
    """One wrk run. Latencies in milliseconds; `percentiles_ms` keys are "50", "75", "90", "99"."""

    requests_per_s: float
    requests: int
    duration_s: float
    latency_mean_ms: float
    latency_max_ms: float
    percentiles_ms: dict[str, float]
    read_bytes: int
    socket_errors: dict[str, int] = field(default_factory=dict)
    non_2xx_3xx: int = 0

    @property
    def errors(self) -> int:
        return sum(self.socket_errors.values()) + self.non_2xx_3xx

    def figures(self) -> dict[str, float | int | None]:
        """The flat figures a scenario reports for this run."""
        return {"requests_per_s": round(self.requests_per_s, 1), "p50_ms": self.percentiles_ms.get("50"),
                "p90_ms": self.percentiles_ms.get("90"), "p99_ms": self.percentiles_ms.get("99"),
                "mean_ms": self.latency_mean_ms, "max_ms": self.latency_max_ms, "requests": self.requests,
                "errors": self.errors, "non_2xx_3xx": self.non_2xx_3xx, "socket_errors": sum(self.socket_errors.values())}

    def as_dict(self) -> dict:
        return asdict(self)


def _ms(value: str, unit: str) -> float:
    number = float(value) if "nan" not in value else 0.0
    return round(number * _TIME_MS[unit], 6)


def _count(value: str, suffix: str) -> float:
    return float(value) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[suffix]


def parse(text: str) -> WrkResult:
    """Read wrk's text report; BenchError when the text is not one (wrk failed before measuring)."""
    rps = re.search(r"^Requests/sec:\s+" + _NUMBER, text, re.MULTILINE)
    total = re.search(r"^\s*(\d+) requests in ([0-9.]+)(us|ms|s|m|h),\s*([0-9.]+)(B|KB|MB|GB|TB) read", text, re.MULTILINE)
    if not rps or not total:
        raise BenchError(f"wrk printed no report:\n{text.strip()[-2000:]}")
    latency = re.search(r"^\s*Latency\s+" + r"\s+".join([_NUMBER + r"(us|ms|s|m|h)"] * 3), text, re.MULTILINE)
    mean_ms = _ms(*latency.group(1, 2)) if latency else 0.0
    max_ms = _ms(*latency.group(5, 6)) if latency else 0.0
    percentiles = {m.group(1): _ms(m.group(2), m.group(3))
                   for m in re.finditer(r"^\s*(\d+(?:\.\d+)?)%\s+" + _NUMBER + r"(us|ms|s|m|h)\s*$", text, re.MULTILINE)}
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    socket_errors = dict(zip(("connect", "read", "write", "timeout"), map(int, sockets.groups()))) if sockets else {}
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return WrkResult(
        requests_per_s=float(rps.group(1)),
        requests=int(total.group(1)),
        duration_s=_ms(total.group(2), total.group(3)) / 1000.0,
        latency_mean_ms=mean_ms,
        latency_max_ms=max_ms,
        percentiles_ms=percentiles,
        read_bytes=int(float(total.group(4)) * _SIZE_B[total.group(5)]),
        socket_errors=socket_errors,
        non_2xx_3xx=int(non_2xx.group(1)) if non_2xx else 0,
    )


def lua_string(text: str) -> str:
    """`text` as a Lua string literal: printable ASCII as is, every other byte as a 3-digit escape."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        out.append(char if 32 <= byte < 127 and char not in '"\\' else f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def lua_script(method: str = "GET", body: str | bytes | None = None, headers: Mapping[str, str] | None = None) -> str:
    """A wrk script that sends every request with this method, body and headers."""
    lines = [f"wrk.method = {lua_string(method)}"]
    if body is not None:
        lines.append(f"wrk.body = {lua_string(body.decode() if isinstance(body, bytes) else body)}")
    for name, value in (headers or {}).items():
        lines.append(f"wrk.headers[{lua_string(name)}] = {lua_string(value)}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class RandomParam:
    """A query parameter drawn anew for every request: `template` in Lua's string.format syntax
    (`C%05d`), filled with one integer drawn from each inclusive range of `ranges`."""

    name: str
    template: str
    ranges: tuple[tuple[int, int], ...] = ()


def lua_random_script(path: str, params: tuple[RandomParam, ...], headers: Mapping[str, str] | None = None) -> str:
    """A wrk script sending GET `path?params` with a new draw of every parameter on each request, so that
    each request asks a question the server (most likely) has not answered yet. Each wrk thread has
    its own seed."""
    header_lines = "".join(f"  [{lua_string(k)}] = {lua_string(v)},\n" for k, v in (headers or {}).items())
    parts = []
    for param in params:
        draws = ", ".join(f"math.random({lo}, {hi})" for lo, hi in param.ranges)
        value = f"string.format({lua_string(param.template)}, {draws})" if draws else lua_string(param.template)
        parts.append(f"{lua_string(param.name + '=')} .. encode({value})")
    query = " .. \"&\" .. ".join(parts) or '""'
    return (
        "local threads = 0\n"
        "function setup(thread)\n  threads = threads + 1\n  thread:set(\"seed\", threads)\nend\n"
        "function init(args)\n  math.randomseed(os.time() * 1000 + seed * 7919)\nend\n"
        "local function encode(s)\n"
        "  return (s:gsub(\"[^%w%-_%.~]\", function(c) return string.format(\"%%%02X\", string.byte(c)) end))\n"
        "end\n"
        f"local headers = {{\n{header_lines}}}\n"
        "function request()\n"
        f"  return wrk.format(\"GET\", {lua_string(path)} .. \"?\" .. {query}, headers)\n"
        "end\n")


def run(url: str, settings: WrkSettings, *, method: str = "GET", body: str | bytes | None = None,
        headers: Mapping[str, str] | None = None, script: str | None = None) -> WrkResult:
    """Run wrk once against `url` (with `script`, a whole wrk Lua script that builds the requests);
    BenchError when it fails or every request failed."""
    wrk = find_tool("wrk")
    with tempfile.TemporaryDirectory(prefix="semreg-wrk-") as tmp:
        path = Path(tmp) / "request.lua"
        path.write_text(script if script is not None else lua_script(method, body, headers))
        script = str(path)
        argv = [wrk, *settings.argv(), "-s", script, url]
        try:
            done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=settings.duration_s + 60)
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"wrk did not finish: {' '.join(argv)}") from exc
    if done.returncode != 0:
        raise BenchError(f"wrk failed ({done.returncode}) on {url}: {(done.stderr or done.stdout).strip()[-2000:]}")
    result = parse(done.stdout)
    if result.requests == 0:
        raise BenchError(f"wrk completed no request on {url}:\n{done.stdout}")
    return result
