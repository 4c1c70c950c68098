"""Faults drawn from a seed and played against a `LocalCluster` while writers run (issue 21's fault test).

`plan()` draws the whole schedule up front from the seed, so a seed names one schedule: one fault every
~6 s, each of SIGKILL one node and restart it on the same data directory and port 3-5 s later, SIGSTOP
one node for 8 s (past a 5 s lease) then SIGCONT, SIGKILL two nodes at once then restart both, stop etcd
for 5 s then start it on the same data directory and port. `Chaos` plays it in a thread of its own: a
node counts as down from its SIGKILL or SIGSTOP until it answers `/readyz` again; a fault whose node is
still down when its time comes takes another one (drawn from the seed), and one that would take a third
node down is skipped and said so (an etcd stop takes no node down). It also notices a node that exits
without being killed.
"""
from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from semreg.bench.localcluster import ClusterNode, LocalCluster
from semreg.bench.peers import PeerProcess

KINDS = ("kill", "pause", "kill2", "etcd")
MAX_DOWN = 2
PAUSE_S = 8.0
ETCD_DOWN_S = 5.0
READY_MARGIN_S = 4.0  # planning: how long a restarted or resumed node takes to be ready again
ETCD_START_S = 2.0  # planning: how long etcd takes to answer once started
TAKES = {"kill": 1, "pause": 1, "kill2": 2, "etcd": 0}  # nodes a fault takes down


@dataclass
class Fault:
    at: float  # seconds after the writes start
    kind: str
    targets: tuple[str, ...]  # node names (none for etcd)
    down_s: float  # until the restart, the SIGCONT or etcd's start

    def __str__(self) -> str:
        what = {"kill": "SIGKILL {} then restart", "pause": "SIGSTOP {} then SIGCONT",
                "kill2": "SIGKILL {} together then restart both", "etcd": "stop etcd{} then start it"}[self.kind]
        return f"+{self.at:5.1f}s {what.format(' + '.join(self.targets))} after {self.down_s:.1f}s"


def plan(seed: int, names: list[str], duration_s: float, every_s: float = 6.0) -> list[Fault]:
    """The faults of one run, drawn from `seed`: never more than two nodes planned down at once. A node is
    planned back once ready, which a node restarting cannot be while etcd is stopped."""
    rng = random.Random(seed)
    back: dict[str, float] = {}  # a node (or etcd): when it is planned to be back
    faults, t = [], rng.uniform(1.5, 3.5)
    while t < duration_s - 3.0:
        down = [n for n in names if back.get(n, 0.0) > t]
        etcd_back = back.get("etcd", 0.0)
        kinds = [k for k in KINDS if len(down) + TAKES[k] <= MAX_DOWN and not (k == "etcd" and etcd_back > t)]
        if kinds:  # (none when two nodes are down and etcd too)
            kind = rng.choice(kinds)
            down_s = {"kill": rng.uniform(3, 5), "kill2": rng.uniform(3, 5), "pause": PAUSE_S, "etcd": ETCD_DOWN_S}[kind]
            targets = tuple(sorted(rng.sample([n for n in names if n not in down], TAKES[kind])))
            if kind == "etcd":
                back["etcd"] = t + down_s + ETCD_START_S
                for n in down:
                    back[n] = max(back[n], back["etcd"] + READY_MARGIN_S)
            for n in targets:
                back[n] = max(t + down_s, etcd_back) + READY_MARGIN_S
            faults.append(Fault(round(t, 1), kind, targets, round(down_s, 1)))
        t += rng.uniform(every_s - 1.0, every_s + 1.0)
    return faults


@dataclass
class Chaos:
    """Plays a plan against a cluster; `live()` is what writers may talk to. A context manager: entering
    starts the clock and the thread, `heal()` ends it."""

    cluster: LocalCluster
    faults: list[Fault]
    seed: int
    log: list[str] = field(default_factory=list)  # what was done, when
    exits: list[str] = field(default_factory=list)  # nodes that exited on their own
    state: dict[str, str] = field(default_factory=dict)  # up, killed, paused, starting, exited
    _actions: list[tuple[float, int, str, tuple[str, ...]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    _t0: float = 0.0
    _etcd_up: bool = True
    _etcd_starting: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.state = {n.name: "up" for n in self.cluster.nodes}
        self._actions = sorted((f.at, n, "fault", (str(n),)) for n, f in enumerate(self.faults))

    def __enter__(self) -> Chaos:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def now(self) -> float:
        return time.monotonic() - self._t0

    def node(self, name: str) -> ClusterNode:
        return next(n for n in self.cluster.nodes if n.name == name)

    def live(self) -> list[ClusterNode]:
        with self._lock:
            return [n for n in self.cluster.nodes if self.state[n.name] == "up"]

    def down(self) -> list[str]:
        with self._lock:
            return sorted(name for name, s in self.state.items() if s != "up")

    def say(self, what: str) -> None:
        self.log.append(f"+{self.now():5.1f}s {what}")

    def _run(self) -> None:
        while not self._stop.is_set():
            while self._actions and self._actions[0][0] <= self.now() and not self._stop.is_set():
                _, _, action, args = self._actions.pop(0)
                self._do(action, args)
            self._watch()
            self._stop.wait(0.1)

    def _later(self, delay_s: float, action: str, *args: str) -> None:
        self._actions.append((self.now() + delay_s, len(self._actions) + 1000, action, args))
        self._actions.sort()

    def _set(self, name: str, state: str) -> None:
        with self._lock:
            self.state[name] = state

    def _do(self, action: str, args: tuple[str, ...]) -> None:
        if action == "fault":
            self._start_fault(self.faults[int(args[0])])
        elif action == "restart":
            for name in args:
                self._restart(name)
        elif action == "resume":
            self.node(args[0]).resume()
            self._set(args[0], "starting")
            self.say(f"SIGCONT {args[0]}")
        elif action == "etcd-start":
            self._start_etcd()

    def _start_fault(self, fault: Fault) -> None:
        down = self.down()
        if fault.kind == "etcd":
            if not self._etcd_up:  # (still starting)
                self.say(f"skipped ({fault}): etcd is already stopped")
                return
            self.cluster.stop_etcd()
            self._etcd_up = False
            self.say("stopped etcd")
            self._later(fault.down_s, "etcd-start")
            return
        if len(down) + len(fault.targets) > MAX_DOWN:
            self.say(f"skipped ({fault}): down now {down}")
            return
        if set(fault.targets) & set(down):  # still down from an earlier fault: others of those up, by the seed
            up = sorted(set(self.state) - set(down))
            targets = tuple(sorted(random.Random(f"{self.seed}/{fault.at}").sample(up, len(fault.targets))))
            self.say(f"{' + '.join(fault.targets)} still down: {fault.kind} {' + '.join(targets)} instead")
            fault = Fault(fault.at, fault.kind, targets, fault.down_s)
        for name in fault.targets:
            self._set(name, "paused" if fault.kind == "pause" else "killed")
        for name in fault.targets:
            node = self.node(name)
            node.pause() if fault.kind == "pause" else node.kill()
        self.say(f"{'SIGSTOP' if fault.kind == 'pause' else 'SIGKILL'} {' + '.join(fault.targets)}")
        if fault.kind == "pause":
            self._later(fault.down_s, "resume", *fault.targets)
        else:
            self._later(fault.down_s, "restart", *fault.targets)

    def _restart(self, name: str) -> None:
        """Start the node again on its data directory and port, without waiting: `_watch` sees it ready."""
        node = self.node(name)
        node.process = PeerProcess(node.name, node.argv, node.url, lambda url: True, node.log_path)
        try:
            node.process.start()
        except Exception as exc:  # it exited at once
            self.exits.append(f"{name} exited while starting: {exc}")
            self._set(name, "exited")
            self.say(f"{name} exited while starting")
            return
        self._set(name, "starting")
        self.say(f"restarted {name}")

    def _start_etcd(self) -> None:
        """In a thread of its own (etcd takes a second or two to elect itself): faults and nodes go on."""
        def start() -> None:
            self.cluster.start_etcd()  # the same argv: the same data directory and port
            self._etcd_up = True
            self.say("etcd answers again")

        self.say("starting etcd")
        self._etcd_starting = threading.Thread(target=start, name="etcd-start", daemon=True)
        self._etcd_starting.start()

    def _watch(self) -> None:
        """Nodes back from a restart or a pause become live once ready; a node that exits unasked is noted."""
        for node in self.cluster.nodes:
            state = self.state[node.name]
            if state in ("up", "starting", "paused") and not node.running:
                code = node.process.proc.returncode if node.process and node.process.proc else None
                self.exits.append(f"{node.name} exited on its own at +{self.now():.1f}s (status {code}, was {state})")
                self._set(node.name, "exited")
                self.say(f"{node.name} EXITED on its own (status {code})")
            elif state == "starting" and ready(node):
                self._set(node.name, "up")
                self.say(f"{node.name} ready")

    def heal(self) -> None:
        """Stop drawing faults and undo every fault in force: etcd started, paused nodes continued, killed
        (or exited) nodes started again."""
        self.__exit__()
        if self._etcd_starting is None or not self._etcd_starting.is_alive():
            if not self._etcd_up:
                self._start_etcd()
        for node in self.cluster.nodes:
            state = self.state[node.name]
            if state == "paused":
                node.resume()
                self.say(f"SIGCONT {node.name} (heal)")
            elif state in ("killed", "exited"):
                self._restart(node.name)
        self._actions.clear()
        if self._etcd_starting is not None:
            self._etcd_starting.join(60)


def ready(node: ClusterNode) -> bool:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        r = httpx.get(node.url + "/readyz", timeout=0.5)
        return r.status_code == 200
    return False
