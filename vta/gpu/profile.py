"""What makes a kernel slow, counted by the SIMT emulator: bank conflicts, sectors, barriers,
instructions.

``Emulator(func, profile=True)`` runs the kernel with a ``Profile`` attached; every memory
access, barrier and warp-level instruction is reported to it, grouped by warp. The models
(stated in docs/gpu.md with their sources):

Shared memory (CUDA C++ Programming Guide, "Shared Memory" for compute capability 5.x and
later): 32 banks of 4-byte words; word ``a // 4`` is in bank ``(a // 4) % 32``. Lanes that touch
the same word are served together (broadcast/multicast), so one *wavefront* serves at most one
distinct word per bank, and an access needs as many wavefronts as the largest number of distinct
words any bank holds. Accesses wider than 4 bytes are split into phases processed one after
another: 8-byte accesses in two phases of 16 lanes, 16-byte accesses (and ``ldmatrix``, whose
8 row addresses per matrix are 16 bytes each; ``cp.async`` writes) in phases of 8 lanes. The
ideal is one wavefront per phase that has active lanes; *bank conflicts* (replays) are the
wavefronts beyond that.

Global memory (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory"; Nsight
Compute's sectors per request): a warp's request touches 32-byte sectors; the count is the
number of distinct sectors the active lanes' bytes fall in (buffers are assumed 256-byte
aligned, as ``cudaMalloc`` returns them). The *minimum* is the tiles' footprint: per block and
per interval between two barriers or ``cp.async`` commits (a kernel loads one stage's tiles in
each), the number of distinct sectors the block touches in that buffer, summed.
``sectors / min_sectors`` is 1.0 exactly when no sector of a tile is fetched twice (by
uncoalesced or overlapping requests); it cannot be below 1.

Instructions are counted per warp (an instruction a warp issues with any lane active counts
once): global and shared loads and stores, ``cp.async`` (and its commit/wait), ``ldmatrix``,
``mma.sync``, WMMA operations, ``bar.sync``, and ``alu`` - arithmetic, comparisons, selects and
casts evaluated on per-thread values (values every thread agrees on, loop counters and
constants, are folded by a compiler and not counted).
"""

from __future__ import annotations

import io
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.gpu.target import WARP_LANES

__all__ = ["BANKS", "WORD", "SECTOR", "phase_lanes", "shared_wavefronts", "bank_conflicts",
           "request_sectors", "BufferCounters", "Profile", "format_profile"]

#: shared-memory banks and their width in bytes
BANKS = 32
WORD = 4
#: bytes of a global-memory sector
SECTOR = 32


def phase_lanes(width: int) -> int:
    """Lanes served in one phase by an access of ``width`` bytes per lane."""
    # one wavefront serves BANKS words: a warp's lanes at up to one word each, half of them
    # at two words, a quarter at four
    return min(WARP_LANES, BANKS * WORD // max(width, WORD))


def shared_wavefronts(addr: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Wavefronts and ideal wavefronts of warp accesses to shared memory.

    ``addr``: (requests, WARP_LANES) byte addresses relative to the buffer (multiple of 4 apart from
    the bank origin), ``-1`` for an inactive lane; ``width``: bytes per lane (1, 2, 4, 8 or
    16, the access aligned to it). Returns two (requests,) arrays (see the module docstring).
    """
    addr = np.asarray(addr, np.int64).reshape(-1, WARP_LANES)
    r = addr.shape[0]
    lanes = phase_lanes(width)
    phases = WARP_LANES // lanes
    nwords = max(1, width // WORD)
    active = addr >= 0
    words = (addr // WORD)[:, :, None] + np.arange(nwords)  # (r, lanes, nwords)
    req = np.broadcast_to(np.arange(r)[:, None, None], words.shape)
    ph = np.broadcast_to((np.arange(WARP_LANES) // lanes)[None, :, None], words.shape)
    act = np.broadcast_to(active[:, :, None], words.shape)
    w, q, p = words[act], req[act], ph[act]
    wave = np.zeros(r, np.int64)
    ideal = np.zeros(r, np.int64)
    if w.size:
        # distinct (request, phase, word); then per (request, phase, bank) how many words
        key = (q * phases + p) * (1 << 40) + w
        uniq = np.unique(key)
        qp = uniq >> 40
        bank = (uniq & ((1 << 40) - 1)) % BANKS
        per_bank = np.unique(qp * BANKS + bank, return_counts=True)
        qp_of = per_bank[0] // BANKS
        worst = np.zeros(r * phases, np.int64)
        np.maximum.at(worst, qp_of, per_bank[1])
        wave = worst.reshape(r, phases).sum(axis=1)
        ideal = (worst.reshape(r, phases) > 0).sum(axis=1)
    return wave, ideal


def bank_conflicts(addr: np.ndarray, width: int) -> int:
    """Replays (wavefronts beyond the ideal) of warp accesses ``addr`` (see shared_wavefronts)."""
    wave, ideal = shared_wavefronts(addr, width)
    return int((wave - ideal).sum())


def request_sectors(addr: np.ndarray, width: int) -> np.ndarray:
    """Distinct 32-byte sectors each warp request (a row of ``addr``, -1 inactive) touches."""
    addr = np.asarray(addr, np.int64).reshape(-1, WARP_LANES)
    first, last = addr // SECTOR, (addr + width - 1) // SECTOR
    act = addr >= 0
    span = int((last - first).max(initial=0)) + 1
    secs = first[:, :, None] + np.arange(span)
    ok = act[:, :, None] & (secs <= last[:, :, None])
    req = np.broadcast_to(np.arange(addr.shape[0])[:, None, None], secs.shape)
    key = np.unique(req[ok] * (1 << 42) + secs[ok])
    return np.bincount(key >> 42, minlength=addr.shape[0])


@dataclass
class BufferCounters:
    """Counters of one buffer: requests (warp instructions) and their cost."""

    scope: str
    load_requests: int = 0
    store_requests: int = 0
    #: shared: wavefronts and replays; global: sectors
    load_wavefronts: int = 0
    store_wavefronts: int = 0
    load_conflicts: int = 0
    store_conflicts: int = 0
    load_sectors: int = 0
    store_sectors: int = 0
    load_bytes: int = 0
    store_bytes: int = 0
    #: global: per block and interval (barriers, cp.async commits), the distinct sectors
    #: touched (the tiles' footprint), summed
    load_min_sectors: int = 0
    store_min_sectors: int = 0


@dataclass
class Profile:
    """Per-kernel counters, filled by the emulator (see the module docstring)."""

    kernel: str = ""
    blocks: int = 0
    threads_per_block: int = 0
    buffers: dict[str, BufferCounters] = field(default_factory=dict)
    instructions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    barriers: int = 0
    _block_sectors: dict[tuple[str, bool], list[np.ndarray]] = field(
        default_factory=lambda: defaultdict(list), repr=False)

    # ------------------------------------------------------------------ recording
    def count(self, kind: str, warps: int) -> None:
        """``warps`` warps issued one instruction of ``kind``."""
        if warps:
            self.instructions[kind] += warps

    def barrier(self, blocks: int) -> None:
        """``blocks`` blocks passed a barrier: a new interval of tile loads starts."""
        self.barriers += blocks
        self.close_interval()

    def counters(self, name: str, scope: str) -> BufferCounters:
        c = self.buffers.get(name)
        if c is None:
            c = self.buffers[name] = BufferCounters(scope)
        return c

    def access(self, name: str, scope: str, addr: np.ndarray, block: np.ndarray, width: int,
               store: bool, kind: str | None = None) -> None:
        """Warp accesses: ``addr`` (requests, WARP_LANES) byte addresses (-1 inactive; shared:
        relative to the block's buffer), ``block`` (requests,) the block each came from,
        ``width`` bytes per lane. ``kind`` names the instruction (default ld/st.scope; ``""``
        when another access of the same instruction counted it: cp.async's shared side)."""
        addr = np.asarray(addr, np.int64).reshape(-1, WARP_LANES)
        keep = (addr >= 0).any(axis=1)
        addr, block = addr[keep], np.asarray(block)[keep]
        if not addr.shape[0]:
            return
        c = self.counters(name, scope)
        n = addr.shape[0]
        nbytes = int((addr >= 0).sum()) * width
        op = "st" if store else "ld"
        if kind != "":
            self.count(kind or f"{op}.{'global' if scope == 'global' else 'shared'}", n)
        if scope == "global":
            secs = int(request_sectors(addr, width).sum())
            self._remember_sectors(name, store, addr, block, width)
            if store:
                c.store_requests += n
                c.store_sectors += secs
                c.store_bytes += nbytes
            else:
                c.load_requests += n
                c.load_sectors += secs
                c.load_bytes += nbytes
            return
        wave, ideal = shared_wavefronts(addr, width)
        if store:
            c.store_requests += n
            c.store_wavefronts += int(wave.sum())
            c.store_conflicts += int((wave - ideal).sum())
            c.store_bytes += nbytes
        else:
            c.load_requests += n
            c.load_wavefronts += int(wave.sum())
            c.load_conflicts += int((wave - ideal).sum())
            c.load_bytes += nbytes

    def _remember_sectors(self, name: str, store: bool, addr: np.ndarray, block: np.ndarray,
                          width: int) -> None:
        first, last = addr // SECTOR, (addr + width - 1) // SECTOR
        span = int((last - first).max(initial=0)) + 1
        secs = first[:, :, None] + np.arange(span)
        ok = (addr >= 0)[:, :, None] & (secs <= last[:, :, None])
        blk = np.broadcast_to(block.reshape(-1, 1, 1), secs.shape)
        self._block_sectors[(name, store)].append(np.unique(blk[ok] * (1 << 40) + secs[ok]))

    def end_batch(self) -> None:
        """A batch of whole blocks finished."""
        self.close_interval()

    def close_interval(self) -> None:
        """A barrier or a cp.async commit: add the distinct (block, sector) pairs of the
        interval it closes to the minimum."""
        for (name, store), parts in self._block_sectors.items():
            n = int(np.unique(np.concatenate(parts)).size) if parts else 0
            c = self.buffers[name]
            if store:
                c.store_min_sectors += n
            else:
                c.load_min_sectors += n
        self._block_sectors.clear()

    # ------------------------------------------------------------------ summaries
    @property
    def bank_conflicts(self) -> int:
        return sum(c.load_conflicts + c.store_conflicts for c in self.buffers.values()
                   if c.scope != "global")

    def sectors(self, store: bool = False) -> tuple[int, int]:
        """(sectors, minimum sectors) over every global buffer, loads or stores."""
        g = [c for c in self.buffers.values() if c.scope == "global"]
        if store:
            return sum(c.store_sectors for c in g), sum(c.store_min_sectors for c in g)
        return sum(c.load_sectors for c in g), sum(c.load_min_sectors for c in g)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "blocks": self.blocks,
            "threads_per_block": self.threads_per_block, "barriers": self.barriers,
            "barriers_per_block": self.barriers / max(1, self.blocks),
            "bank_conflicts": self.bank_conflicts,
            "instructions": dict(sorted(self.instructions.items())),
            "buffers": {k: vars(v) for k, v in sorted(self.buffers.items())},
        }


def format_profile(p: Profile) -> str:
    """The counters as text tables (``vta run --target cuda-emu --profile``). ``rich`` is
    loaded here, not with the module: ``vta.run.report`` imports this function and a run on the
    accelerator never calls it."""
    from rich.console import Console  # a third-party module, loaded with the first table
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=110, color_system=None)
    con.print(f"[bold]{p.kernel}[/bold]: {p.blocks} blocks x {p.threads_per_block} threads, "
              f"{p.barriers / max(1, p.blocks):.0f} barriers per block")
    gl = Table(title="global memory (32-byte sectors; min: the tiles' footprint)")
    for col in ("buffer", "ld requests", "ld sectors", "vs min", "st requests", "st sectors",
                "vs min"):
        gl.add_column(col, justify="left" if col == "buffer" else "right")
    sh = Table(title="shared memory (32 banks x 4 B; extra wavefronts are bank conflicts)")
    for col in ("buffer", "ld requests", "ld wavefronts", "conflicts", "st requests",
                "st wavefronts", "conflicts"):
        sh.add_column(col, justify="left" if col == "buffer" else "right")
    for name, c in sorted(p.buffers.items()):
        if c.scope == "global":
            gl.add_row(name, f"{c.load_requests:,}", f"{c.load_sectors:,}",
                       _ratio(c.load_sectors, c.load_min_sectors), f"{c.store_requests:,}",
                       f"{c.store_sectors:,}", _ratio(c.store_sectors, c.store_min_sectors))
        else:
            sh.add_row(name, f"{c.load_requests:,}", f"{c.load_wavefronts:,}",
                       f"{c.load_conflicts:,}", f"{c.store_requests:,}",
                       f"{c.store_wavefronts:,}", f"{c.store_conflicts:,}")
    con.print(gl)
    con.print(sh)
    it = Table(title="warp instructions by kind")
    it.add_column("kind")
    it.add_column("count", justify="right")
    it.add_column("per block", justify="right")
    for k, v in sorted(p.instructions.items()):
        it.add_row(k, f"{v:,}", f"{v / max(1, p.blocks):,.1f}")
    con.print(it)
    ld, ld_min = p.sectors(False)
    st, st_min = p.sectors(True)
    con.print(f"bank conflicts {p.bank_conflicts}; global load sectors {ld:,} "
              f"({_ratio(ld, ld_min)} the minimum), store sectors {st:,} ({_ratio(st, st_min)})")
    return buf.getvalue()


def _ratio(n: int, lo: int) -> str:
    return f"{n / lo:.2f}x" if lo else "-"
