"""The memory port server's wait for ``timeout | wake`` (``_PortServer._arm``/``_either``):
no condition object or closure per wait, one bound method on both events that ends the wait
in progress once and ignores the events of waits already ended, as a triggered ``AnyOf``
does; and the server's ``wake`` kept across waits that their timeouts ended (``woken``)."""

from __future__ import annotations

from typing import Any

import pytest
import simpy

from vta.config import HwConfig
from vta.isa.memport import Transfer
from vta.isa.timing import read_channel
from vta.sim import engine
from vta.sim.machine import _PortServer

PYNQ = HwConfig.from_yaml("hwconfigs/pynq.yaml")


def _logging_server(env: Any) -> tuple[_PortServer, list[int]]:
    """A server (no shortcuts: every wait's end is an event) whose wait ends are logged
    (the cycle) instead of served."""
    server = _PortServer(env, PYNQ, False)
    log: list[int] = []
    server._done_cb = lambda _: log.append(int(env.now))
    return server, log


@pytest.mark.parametrize("make_env", [engine.Environment, simpy.Environment])
def test_a_wait_ends_once_at_its_first_event(make_env: Any) -> None:
    """A request (``wake``) at cycle 3 ends the wait; its timeout at 10 then does nothing."""
    env = make_env()
    server, log = _logging_server(env)
    server.wake.callbacks.clear()  # (not idle: the waits below are armed by hand)
    first = env.timeout(10)
    server._arm(first)

    def requests() -> Any:
        yield env.timeout(3)
        server.woken = True
        server.wake.succeed()

    env.process(requests())
    env.run()
    assert log == [3]


@pytest.mark.parametrize("make_env", [engine.Environment, simpy.Environment])
def test_a_stale_timeout_does_not_end_a_later_wait(make_env: Any) -> None:
    """The timeout of a wait that ended (``_until`` cleared, as ``_either`` does) is
    processed during a later wait on the same ``wake``: only the later one's ends it."""
    env = make_env()
    server, log = _logging_server(env)
    server.wake.callbacks.clear()
    stale = env.timeout(6)
    server._arm(stale)
    server._until = None  # that wait ended (as by its request)
    later = env.timeout(9)
    server._arm(later)
    env.run()
    assert log == [9]


@pytest.mark.parametrize("shortcuts", [True, False])
def test_requests_during_waits_complete_as_predicted(shortcuts: bool) -> None:
    """Transfers arriving while others are in flight (waits ended by requests and by
    timeouts, the ``wake`` kept across the latter) complete when the port alone predicts, on
    the lean engine with and without its shortcuts and on simpy."""
    arrivals = [(0, Transfer((16, 16, 16, 16))), (5, Transfer((8, 8))), (40, Transfer((4,))),
                (41, Transfer((16, 16, 16))), (300, Transfer((2, 2), lead=3))]
    got = {}
    for name, env in (("lean", engine.Environment()), ("simpy", simpy.Environment())):
        server = _PortServer(env, PYNQ, shortcuts and name == "lean")
        ends: list[tuple[int, int]] = []

        def dma(k: int, at: int, transfer: Transfer, env: Any = env,
                server: _PortServer = server, ends: list[tuple[int, int]] = ends) -> Any:
            yield env.timeout(at)
            yield server.request(transfer)
            ends.append((k, int(env.now)))

        for k, (at, transfer) in enumerate(arrivals):
            env.process(dma(k, at, transfer))
        env.run()
        got[name] = sorted(ends)
    assert got["lean"] == got["simpy"]
    assert len(got["lean"]) == len(arrivals)
    # the first transfer, alone until cycle 5, is slowed by the second
    end_of = dict(got["lean"])
    # the second and third arrive while the port is busy (slowed), the last on an idle port
    for k in (1, 2, 3):
        assert end_of[k] > arrivals[k][0] + _alone_end(arrivals[k][1])
    assert end_of[4] == 300 + _alone_end(arrivals[4][1])


def _alone_end(transfer: Transfer) -> int:
    from vta.isa.memport import alone

    return alone(read_channel(PYNQ), transfer)
