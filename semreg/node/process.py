"""`semreg serve`'s process: a node with its listeners, run on an event loop of uvicorn's choice (uvloop where it
is installed) until SIGTERM or SIGINT.

A signal asks the node to stop (`Node.stopping`: blocking reads answered at once with their current result, so
the drain does not wait out watches that may block for minutes; a start-up still running gives up at its next
look), then the services stop in reverse: the public port drains first, and the node leaves the ring before its
node-to-node port closes. A second SIGINT cuts the drain short. Once stopped, the process re-raises the signals it
took, as uvicorn does (SIGINT ends it as an interrupted command; `semreg serve` notes SIGTERM and exits 0).

Exit status: 0 once stopped (a start-up a signal gave up included), `STARTUP_FAILURE` when a service failed to
start (the log says which and why; what had started was stopped again).
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

from semreg.node.listeners import HttpListener
from semreg.node.node import Node

STARTUP_FAILURE = 3  # as uvicorn's
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run(node: Node) -> int:
    public = node.public
    if public is None:
        raise ValueError("a node run as a process listens: make it with listen=True")
    with asyncio.Runner(loop_factory=public.server.config.get_loop_factory()) as runner, signals(node, public):
        return runner.run(serve(node, public))


async def serve(node: Node, public: HttpListener) -> int:
    status = 0
    try:
        if await node.start():
            await public.exited()  # until a signal
    except Exception:  # a service failed to start: the manager said which, and stopped what had started
        status = STARTUP_FAILURE
    finally:
        await node.stop()
    return status


@contextlib.contextmanager
def signals(node: Node, public: HttpListener) -> Iterator[None]:
    """SIGINT and SIGTERM ask the node to stop while it runs, and are raised again once it has stopped."""
    taken: list[int] = []

    def asked(sig: int, frame: FrameType | None) -> None:
        if taken and sig == signal.SIGINT:
            public.server.force_exit = True  # a second Ctrl-C: the connections are not waited for
        taken.append(sig)
        public.server.should_exit = True
        node.stop_asked.set()  # a start-up still running gives up (before the node knows its loop, too)
        node.post(node.stopping)

    before = {sig: signal.signal(sig, asked) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    for again in reversed(taken):
        signal.raise_signal(again)
