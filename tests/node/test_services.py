"""The lifecycle of a node's parts (`semreg.node.services`): services start after the ones they need, stop in
reverse, a start that fails stops what started before it, a stop that hangs is cut at its bound on the clock
(a fake one here: the test moves it, nothing sleeps), and the states and log lines say what happened."""
from __future__ import annotations

import asyncio
import logging

import pytest

from semreg.clock import FakeClock
from semreg.errors import StopAsked
from semreg.node.services import Basic, CannotStart, Every, Manager, State, in_order


class Recorded:
    """A service that writes what happens to it in a shared journal."""

    def __init__(self, name: str, journal: list[str], *, needs: tuple[str, ...] = (), fail: Exception | None = None,
                 hang: asyncio.Event | None = None, stop_fails: bool = False, why: str = "") -> None:
        self.name, self.needs = name, needs
        self.journal, self.fail, self.hang, self.stop_fails, self.why = journal, fail, hang, stop_fails, why

    async def start(self) -> None:
        self.journal.append(f"start {self.name}")
        if self.fail is not None:
            raise self.fail

    async def stop(self) -> None:
        self.journal.append(f"stop {self.name}")
        if self.hang is not None:
            await self.hang.wait()
        if self.stop_fails:
            raise OSError("the disk went away")

    def waiting(self) -> str:
        return self.why


def test_services_start_after_what_they_need_and_otherwise_in_the_order_given():
    journal: list[str] = []
    services = [Recorded("api", journal, needs=("registry", "store")), Recorded("store", journal),
                Recorded("metrics", journal), Recorded("registry", journal, needs=("store",))]
    assert [s.name for s in in_order(services)] == ["store", "registry", "api", "metrics"]


@pytest.mark.parametrize("services, problem", [
    ([Basic("a", needs=("b",))], "a needs b, which is not among the services"),
    ([Basic("a"), Basic("a")], "two services are named a"),
    ([Basic("a", needs=("b",)), Basic("b", needs=("a",))], "a and b need each other"),
])
def test_a_list_of_services_that_cannot_start_in_any_order_is_refused_when_the_node_is_wired(services, problem):
    with pytest.raises(ValueError, match=problem):
        in_order(services)


def test_the_manager_starts_in_order_stops_in_reverse_and_says_so(caplog):
    journal: list[str] = []
    manager = Manager([Recorded("registry", journal, needs=("store",)), Recorded("store", journal),
                       Recorded("dns", journal, needs=("registry",))], FakeClock(), stop_within_s=5)
    assert manager.states == {"store": State.NEW, "registry": State.NEW, "dns": State.NEW}

    async def main() -> None:
        await manager.start()
        assert manager.states == {"store": State.RUNNING, "registry": State.RUNNING, "dns": State.RUNNING}
        await manager.stop()

    with caplog.at_level(logging.INFO, logger="semreg.services"):
        asyncio.run(main())
    assert journal == ["start store", "start registry", "start dns", "stop dns", "stop registry", "stop store"]
    assert set(manager.states.values()) == {State.STOPPED}
    lines = [(r.msg, r.service) for r in caplog.records if r.name == "semreg.services"]
    assert lines == [("service started", "store"), ("service started", "registry"), ("service started", "dns"),
                     ("service stopped", "dns"), ("service stopped", "registry"), ("service stopped", "store")]
    assert all(isinstance(r.ms, int) and r.ms >= 0 for r in caplog.records if r.name == "semreg.services")


def test_a_service_that_fails_to_start_is_stopped_with_those_before_it_and_those_after_never_start(caplog):
    journal: list[str] = []
    manager = Manager([Recorded("store", journal), Recorded("registry", journal, fail=OSError("no space left")),
                       Recorded("dns", journal)], FakeClock(), stop_within_s=5)

    async def main() -> None:
        with pytest.raises(OSError, match="no space left"):
            await manager.start()
        await manager.stop()  # what the process does on its way out anyway: nothing is stopped twice

    with caplog.at_level(logging.INFO, logger="semreg.services"):
        asyncio.run(main())
    assert journal == ["start store", "start registry", "stop registry", "stop store"]
    assert manager.states == {"store": State.STOPPED, "registry": State.FAILED, "dns": State.NEW}
    failed = [r for r in caplog.records if r.msg == "service failed to start"]
    assert len(failed) == 1 and failed[0].service == "registry" and "no space left" in failed[0].error
    assert failed[0].exc_info is not None  # not foreseen: the traceback says where


def test_a_service_that_says_why_it_cannot_start_is_logged_without_a_traceback(caplog):
    manager = Manager([Recorded("dns", [], fail=CannotStart("dns: cannot listen on 127.0.0.1:53"))], FakeClock(),
                      stop_within_s=5)

    async def main() -> None:
        with pytest.raises(CannotStart):
            await manager.start()

    with caplog.at_level(logging.INFO, logger="semreg.services"):
        asyncio.run(main())
    failed = [r for r in caplog.records if r.msg == "service failed to start"]
    assert [(r.service, r.error, r.exc_info) for r in failed] == [("dns", "dns: cannot listen on 127.0.0.1:53", None)]


def test_a_start_up_given_up_says_which_step_gave_up_and_the_stop_that_follows_stops_what_started(caplog):
    journal: list[str] = []
    manager = Manager([Recorded("store", journal), Recorded("registry", journal, fail=StopAsked("after 10 of 50")),
                       Recorded("dns", journal)], FakeClock(), stop_within_s=5)

    async def main() -> None:
        with pytest.raises(StopAsked, match="after 10 of 50"):
            await manager.start()
        assert journal == ["start store", "start registry"]
        await manager.stop()

    with caplog.at_level(logging.INFO, logger="semreg.services"):
        asyncio.run(main())
    assert journal == ["start store", "start registry", "stop registry", "stop store"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # asked for: no failure


def test_a_stop_asked_between_two_services_starts_no_more():
    journal: list[str] = []
    asked = [False]

    class Asking(Recorded):
        async def start(self) -> None:
            await super().start()
            asked[0] = True  # a signal, while this one started

    manager = Manager([Recorded("store", journal), Asking("registry", journal), Recorded("dns", journal)],
                      FakeClock(), stop_within_s=5, stop_asked=lambda: asked[0])

    async def main() -> None:
        with pytest.raises(StopAsked, match="before dns started"):
            await manager.start()
        await manager.stop()

    asyncio.run(main())
    assert journal == ["start store", "start registry", "stop registry", "stop store"]
    assert manager.states["dns"] is State.NEW


def test_a_stop_that_hangs_is_cut_at_its_bound_on_the_clock_and_the_others_still_stop(caplog):
    journal: list[str] = []
    clock = FakeClock()
    never = asyncio.Event()
    manager = Manager([Recorded("store", journal), Recorded("replica", journal, hang=never),
                       Recorded("dns", journal, stop_fails=True)], clock, stop_within_s=30)

    async def main() -> None:
        await manager.start()
        stopping = asyncio.ensure_future(manager.stop())
        while "stop replica" not in journal:
            await asyncio.sleep(0)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not stopping.done() and manager.states["replica"] is State.STOPPING
        clock.advance(29.9)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not stopping.done()  # not before its bound
        clock.advance(0.1)
        await stopping

    with caplog.at_level(logging.INFO, logger="semreg.services"):
        asyncio.run(main())
    assert journal == ["start store", "start replica", "start dns", "stop dns", "stop replica", "stop store"]
    assert manager.states == {"store": State.STOPPED, "replica": State.FAILED, "dns": State.FAILED}
    problems = [(r.msg, r.service) for r in caplog.records if r.levelno >= logging.WARNING]
    assert problems == [("service failed to stop", "dns"), ("service did not stop in time", "replica")]


def test_the_manager_says_why_the_node_is_not_ready_from_the_first_service_that_is_not():
    journal: list[str] = []
    joining = Recorded("membership", journal, why="reading the member list from etcd")
    manager = Manager([Recorded("store", journal), joining], FakeClock(), stop_within_s=5)
    assert manager.waiting("opening") == "opening" and not manager.ready()

    async def main() -> None:
        await manager.start()
        assert manager.waiting("opening") == "reading the member list from etcd" and not manager.ready()
        joining.why = ""
        assert manager.waiting("opening") == "" and manager.ready()

    asyncio.run(main())


def test_a_basic_service_runs_plain_functions_and_coroutines_alike():
    journal: list[str] = []

    async def stop() -> None:
        journal.append("stopped")

    manager = Manager([Basic("timers", lambda: journal.append("armed"), stop)], FakeClock(), stop_within_s=5)

    async def main() -> None:
        await manager.start()
        await manager.stop()

    asyncio.run(main())
    assert journal == ["armed", "stopped"]


def test_a_service_run_every_interval_runs_on_the_clock_from_its_start_until_its_stop():
    clock = FakeClock()
    ran: list[float] = []
    every = Every("trim", 600, lambda: ran.append(clock.monotonic()), clock)
    manager = Manager([every], clock, stop_within_s=5)

    async def main() -> None:
        clock.advance(900)
        await manager.start()
        clock.advance(599)
        assert ran == []
        clock.advance(1)
        clock.advance(600)
        assert ran == [2500, 3100]
        await manager.stop()
        clock.advance(6000)

    asyncio.run(main())
    assert ran == [2500, 3100] and clock.pending == 0
