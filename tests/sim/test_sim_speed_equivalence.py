"""The simulator's speed work (issue 22) changes no cycle and no value: the optimized memory
port against its previous implementation on random traffic, its idle-port shortcut
(``Port.run_alone``) against the server's submit, plan and retire, and the index plans the machine
now caches against the reference interpreter where the cache must be dropped (micro-ops
reloaded under the same instruction). Whole programs are held to the same cycles by
tests/golden (every ResNet-18 kernel's cycles) and to the same values by the differential
tests of this directory."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import _memport_before as before
import numpy as np
import pytest
from _sim_helpers import run_both
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.config import HwConfig
from vta.errors import InputError
from vta.isa import assemble
from vta.isa import memport as after
from vta.sim import simulate


@st.composite
def _transfer(draw: st.DrawFn) -> tuple[int, dict[str, Any]]:
    """(arrival delay after the previous one, Transfer fields)."""
    bursts = tuple(draw(st.lists(st.integers(1, 16), min_size=1, max_size=6)))
    groups: tuple[int, ...] = ()
    if len(bursts) > 1 and draw(st.booleans()):  # rows that run one after another
        cuts = sorted(draw(st.sets(st.integers(1, len(bursts) - 1), max_size=3)))
        edges = [0, *cuts, len(bursts)]
        groups = tuple(b - a for a, b in pairwise(edges))
    fields = {"bursts": bursts, "write": draw(st.booleans()), "groups": groups,
              "gap": draw(st.integers(0, 3)), "lead": draw(st.integers(0, 5)),
              "priority": draw(st.integers(0, 4))}
    return draw(st.integers(0, 60)), fields


def _arrivals(mod: Any, traffic: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, Any]]:
    """``traffic``'s transfers (``mod.Transfer``) at their arrival cycles (each delay after
    the one before)."""
    arrivals, t = [], 0
    for delay, fields in traffic:
        t += delay
        arrivals.append((t, mod.Transfer(**fields)))
    return arrivals


def _drive(mod: Any, read: dict[str, Any], write: dict[str, Any],
           traffic: list[tuple[int, dict[str, Any]]], probes: list[int]) -> list[Any]:
    """Run ``traffic`` through ``mod.Port`` as the machine's port server does (submit at the
    arrival cycle, sleep to the predicted next completion, retire what is done), also asking
    ``finish`` at the ``probes`` cycles; the log of every answer."""
    port = mod.Port(mod.Channel(**read), mod.Channel(**write))
    arrivals = _arrivals(mod, traffic)
    probes = sorted(probes)
    log: list[Any] = []
    i = 0
    while i < len(arrivals) or port.active:
        nxt = port.next_completion() if port.active else None
        log.append(("next", nxt))
        arrive = arrivals[i][0] if i < len(arrivals) else None
        if probes and (nxt is None or probes[0] < nxt) and \
                (arrive is None or probes[0] < arrive):
            p = probes.pop(0)
            if nxt is not None and p >= 0:
                log.append(("probe", p, port.finish(p)))
            continue
        if arrive is not None and (nxt is None or arrive < nxt):
            log.append(("submit", arrive, port.submit(arrivals[i][1], arrive)))
            log.append(("plan", sorted(port.predictions().items())))
            i += 1
            continue
        assert nxt is not None
        log.append(("done", nxt, port.finish(nxt)))
    return log


_CHANNEL = st.fixed_dictionaries({"latency": st.integers(1, 40),
                                  "in_flight": st.sampled_from([1, 2, 4, 16]),
                                  "priority": st.booleans()})
_WRITE = st.fixed_dictionaries({"latency": st.integers(1, 40),
                                "in_flight": st.sampled_from([1, 4]),
                                "command": st.integers(0, 2), "write": st.just(True),
                                "ack": st.integers(0, 1), "priority": st.booleans()})


@settings(max_examples=300, deadline=None)
@given(read=_CHANNEL, write=_WRITE, traffic=st.lists(_transfer(), min_size=1, max_size=7),
       probes=st.lists(st.integers(0, 400), max_size=4))
def test_memport_same_as_before(read: dict[str, Any], write: dict[str, Any],
                                traffic: list[tuple[int, dict[str, Any]]],
                                probes: list[int]) -> None:
    """Every prediction, completion and plan of the optimized port equals the previous
    implementation's, on random transfers (rows, leads, gaps, priorities, both channels)
    arriving at random cycles, with ``finish`` also asked between completions."""
    assert _drive(after, read, write, traffic, probes) == \
        _drive(before, read, write, traffic, probes)


def _drive_by_steps(mod: Any, read: dict[str, Any], write: dict[str, Any],
                    traffic: list[tuple[int, dict[str, Any]]], probes: list[int],
                    step: int | None, woken: bool = False) -> list[Any]:
    """``_drive`` of ``mod.Port`` planned as the lean engine's server plans it
    (``Port.next_completion`` with horizons ``step`` apart from the last event, stopping at
    a horizon by which a transfer arrives or a probe comes: the plan so far is kept, or
    discarded by the submit; ``step`` None: the whole plan at once); the log without the
    ``next`` answers (None while a completion is known only to be after the horizon).
    ``woken``: as the server does when a request wakes it, each transfer is submitted at its
    arrival and the port finished at that cycle at once, before a completion due at the same
    cycle (a request's wake may come before the server's timeout)."""
    port = mod.Port(mod.Channel(**read), mod.Channel(**write))
    arrivals = _arrivals(mod, traffic)
    probes = sorted(probes)
    log: list[Any] = []
    i, now = 0, 0
    while i < len(arrivals) or port.active:
        arrive = arrivals[i][0] if i < len(arrivals) else None
        nxt = None
        if port.active and step is None:
            nxt = port.next_completion()
        elif port.active:
            horizon = now + step
            while (nxt := port.next_completion(horizon)) is None and \
                    not (arrive is not None and arrive <= horizon) and \
                    not (probes and probes[0] <= horizon):
                horizon += step
        if probes and (nxt is None or probes[0] < nxt) and \
                (arrive is None or probes[0] < arrive):
            p = probes.pop(0)
            if port.active and p >= 0:
                log.append(("probe", p, port.finish(p)))
                now = max(now, p)
            continue
        if arrive is not None and (nxt is None or arrive < nxt or (woken and arrive == nxt)):
            key = port.submit(arrivals[i][1], arrive)
            if woken:
                log.append(("woken", arrive, key, port.finish(arrive),
                            sorted(port.predictions().items())))
            else:
                log += [("submit", arrive, key), ("plan", sorted(port.predictions().items()))]
            i += 1
            now = arrive
            continue
        assert nxt is not None
        log.append(("done", nxt, port.finish(nxt)))
        now = nxt
    return log


@settings(max_examples=300, deadline=None)
@given(read=_CHANNEL, write=_WRITE, traffic=st.lists(_transfer(), min_size=1, max_size=7),
       probes=st.lists(st.integers(0, 400), max_size=4), step=st.integers(1, 80))
def test_memport_planned_by_steps_same_as_before(read: dict[str, Any], write: dict[str, Any],
                                                 traffic: list[tuple[int, dict[str, Any]]],
                                                 probes: list[int], step: int) -> None:
    """Planning the next completion by horizons (the lean engine's port server: a partial
    plan kept between calls, discarded by a submit, skipped by ``finish`` on its channel)
    gives every completion, submit, probe and plan the previous implementation gives."""
    want = [e for e in _drive(before, read, write, traffic, probes) if e[0] != "next"]
    assert _drive_by_steps(after, read, write, traffic, probes, step) == want


@settings(max_examples=200, deadline=None)
@given(read=_CHANNEL, traffic=st.lists(_transfer(), min_size=1, max_size=5))
def test_memport_run_returns_first_completion(read: dict[str, Any],
                                              traffic: list[tuple[int, dict[str, Any]]]
                                              ) -> None:
    """``_run`` with ``first_done`` returns the earliest completion among the jobs that have
    issued every burst (what ``Port.next_completion`` reads instead of scanning the jobs),
    whichever loop issued the last burst (two jobs taking turns, several, or the one left)."""
    ch = after.Channel(**read)
    jobs, t = [], 0
    for key, (delay, fields) in enumerate(traffic, 1):
        t += delay
        jobs.append(after._Job(key, after.Transfer(**{**fields, "write": False}), t))
    got = after._run(ch, after._State(), jobs, None, first_done=True)
    assert got is not None
    assert got == min(j.done for j in jobs if j.next >= j.n)


def test_memport_job_copy_is_as_constructed() -> None:
    """``_Job.copy`` sets every field itself (no ``__init__``): it equals the job the
    constructor makes from the same fields, so a field added to ``_Job`` and not to ``copy``
    fails here."""
    from dataclasses import fields

    job = after._Job(3, after.Transfer((4, 2, 7), groups=(1, 2), gap=1, lead=2), 10)
    job.next, job.done, job.ready = 1, 25, 26
    made = after._Job(**{f.name: getattr(job, f.name) for f in fields(after._Job)})
    assert job.copy() != made  # jobs compare by identity (``_run``'s list removal)
    assert all(getattr(job.copy(), f.name) == getattr(made, f.name) for f in fields(after._Job))


def test_memport_alone_same_as_before() -> None:
    """``alone`` (every DMA's duration) on a range of transfers and channels."""
    for lat in (1, 8, 32):
        for k in (1, 4, 16):
            for bursts in ((16,), (2,) * 8, (16, 16, 3), (1,) * 20):
                for groups in ((), (1,) * len(bursts)):
                    a = after.alone(after.Channel(lat, k), after.Transfer(bursts, groups=groups,
                                                                          gap=2, lead=3))
                    b = before.alone(before.Channel(lat, k),
                                     before.Transfer(bursts, groups=groups, gap=2, lead=3))
                    assert a == b


_RELOAD = """
.alloc X acc 8
.alloc Y out 8
.alloc U uop 2
.uop U 0 1 0
.uop U 2 5 0
LOAD.UOP  sram=0 dram=U+0 y=1 x=1 stride=1
LOAD.ACC  sram=0 dram=X+0 y=1 x=8 stride=8
ALU.ADD   uop=0:1 iter=2,1 dst=1,0 src=1,0
LOAD.UOP  sram=0 dram=U+1 y=1 x=1 stride=1
ALU.ADD   uop=0:1 iter=2,1 dst=1,0 src=1,0
GEMM      uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | push_next
STORE.OUT sram=0 dram=Y+0 y=1 x=8 stride=8 | pop_prev push_prev
FINISH | pop_next
"""


def test_cached_plans_follow_reloaded_microops(pynq: HwConfig) -> None:
    """The same ALU instruction before and after a LOAD.UOP that replaces its micro-op (and a
    GEMM after it) uses the new micro-op, as the reference interpreter does: the machine's
    cached index plans key on the micro-ops loaded."""
    program = assemble(_RELOAD, pynq)
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, size=(8, 1, 16), dtype=np.int32)
    out = run_both(program, pynq, {"X": x})
    want = x.astype(np.int64)
    for k in range(2):  # first uop (dst 0, src 1), then (dst 2, src 5), each over entries o
        want[0 + k] += want[1 + k]
    for k in range(2):
        want[2 + k] += want[5 + k]
    # out mirrors the entries a compute instruction wrote (0..3); the others stay 0
    np.testing.assert_array_equal(out["Y"][:4], want[:4].astype(np.int32).astype(np.int8))
    assert not out["Y"][4:].any()
    assert simulate(program, pynq, {"X": x}, timing_only=True).cycles == \
        simulate(program, pynq, {"X": x}).cycles


def test_timing_only_draws_no_inputs_but_refuses_a_huge_image(pynq: HwConfig) -> None:
    """Timing-only draws no values (its result's ``inputs`` is empty), and still refuses a DRAM
    image larger than the simulator holds, naming the largest allocation, as a run with
    values does."""
    program = assemble(_RELOAD, pynq)
    r = simulate(program, pynq, timing_only=True)
    assert r.inputs == {} and r.cycles == simulate(program, pynq).cycles
    huge = assemble(".alloc BIG acc 20000000\n" + _RELOAD, pynq)
    for timing_only in (True, False):
        with pytest.raises(InputError, match=r"larger than the simulator's .*'BIG'"):
            simulate(huge, pynq, timing_only=timing_only)


def _port_state(port: Any) -> tuple[Any, ...]:
    """Everything a port carries from one transfer to the next."""
    states = {w: port._state(w) for w in port.state}  # (made first where it is pending)
    return (port._keys, {w: (s.last_issue, s.free, list(s.slots), s.last_key)
                         for w, s in states.items()},
            {w: len(j) for w, j in port.jobs.items()})


@settings(max_examples=300, deadline=None)
@given(read=_CHANNEL, write=_WRITE, first=_transfer(), then=_transfer(),
       start=st.integers(0, 50))
def test_run_alone_leaves_what_the_server_leaves(read: dict[str, Any], write: dict[str, Any],
                                                 first: tuple[int, dict[str, Any]],
                                                 then: tuple[int, dict[str, Any]],
                                                 start: int) -> None:
    """``Port.run_alone`` (the machine's idle-port DMA) gives the completion and leaves the
    state that submitting, planning and retiring the transfer does; a transfer after it is
    planned the same on both."""
    ports = [after.Port(after.Channel(**read), after.Channel(**write)) for _ in range(2)]
    served, alone = ports
    transfer = after.Transfer(**first[1])
    assert served.solo_completion(transfer, start) is not None
    key = served.submit(transfer, start)
    done = served.next_completion()
    assert served.finish(done) == [key]
    assert alone.run_alone(transfer, start) == done
    assert _port_state(alone) == _port_state(served)
    later = done + then[0]
    for port in ports:
        port.submit(after.Transfer(**then[1]), later)
    assert alone.predictions() == served.predictions()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), st.integers(1, 5), st.integers(0, 6), st.booleans(),
       st.integers(0, 3), _transfer())
def test_a_transfer_alone_plans_as_before(latency: int, in_flight: int, command: int,
                                          write: bool, ack: int,
                                          transfer: tuple[int, dict[str, Any]]) -> None:
    """``_alone_plan`` (rows one after another planned row by row, ``_rows_alone``) gives the
    previous implementation's completion and channel state on an idle channel."""
    ch = {"latency": latency, "in_flight": in_flight, "command": command if write else 0,
          "write": write, "ack": ack if write else 0}
    fields = {**transfer[1], "write": write}
    got = after._alone_plan(after.Channel(**ch), after.Transfer(**fields))
    want = before._alone_plan(before.Channel(**ch), before.Transfer(**fields))
    assert got[0] == want[0]
    assert (got[1].last_issue, got[1].free, got[1].slots, got[1].last_key) == \
        (want[1].last_issue, want[1].free, want[1].slots, want[1].last_key)
