"""Where a tile's elements are, and whether a warp reduction leaves each result where dst's
layout puts it (docs/reduction.md §2.13).

Validation (TVM's, docs/reduction.md §2.12) compares the extents of src's and dst's dims,
not which lanes hold what. A path computes with registers and lanes: Path 2 combines one
storage coordinate over the lanes of a butterfly, Path 3 folds the registers a thread
holds and then combines over xor masks. Whether that is the reduction the layouts describe depends
on which logical element sits in each (thread, register) of src and of dst. `Holdings`
says that, from the layout; a path says, for each thread and dst slot, which src places
its value is combined from, and `check_results` compares that with the reduction over
the axes, element by element, naming the first dst element that would come out wrong.

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.regtile import RegTile
>>> from ptxkit.generators.layout import TileLayout, S, laneid
>>> tile = RegTile(PtxBuilder(), (8, 4), "f32", TileLayout(S[(8, 4) : (1 @ laneid, 8 @ laneid)]))
>>> Holdings(tile, "dst").element(9, 0)         # lane 9 holds element (1, 1): flat index 5
5
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from .analysis import ReductionError
from .layout import THREAD_STEP, LayoutError, TileLayout, split_index

#: what a path reads from a (thread, slot) that holds no src element
NOWHERE = -1


def placements(layout: TileLayout, shape) -> tuple[np.ndarray, np.ndarray]:
    """(thread, slot) of every logical element (row-major) for every replica copy:
    two int arrays [replicas, elements]. Threads count from 0 in the CTA (`THREAD_STEP`).

    >>> from ptxkit.generators.layout import TileLayout, S, R, laneid
    >>> t, s = placements(TileLayout(S[2:1] + R[2 : 16 @ laneid]), (2,))
    >>> t.tolist(), s.tolist()
    ([[0, 0], [16, 16]], [[0, 1], [0, 1]])
    """
    size = math.prod(shape)
    if layout.size() != size:
        raise LayoutError(f"layout {layout!r} does not fit shape {tuple(shape)}")
    flat = np.arange(size)
    thread = np.zeros(size, np.int64)
    slot = np.zeros(size, np.int64)
    for it in reversed(layout.shard):
        flat, digit = np.divmod(flat, it.extent)
        _add(thread, slot, it.axis, digit * it.stride)
    for key, value in layout.offset:
        _add(thread, slot, key, np.full(size, value))
    threads, slots = [thread], [slot]
    for it in layout.replica:
        steps = np.arange(it.extent) * it.stride
        extra_t, extra_s = np.zeros(it.extent, np.int64), np.zeros(it.extent, np.int64)
        _add(extra_t, extra_s, it.axis, steps)
        threads = [t + e for t in threads for e in extra_t]
        slots = [s + e for s in slots for e in extra_s]
    return np.stack(threads), np.stack(slots)


def _add(thread, slot, key, values) -> None:
    if key.name == "m":
        slot += values
    elif key.name in THREAD_STEP:
        thread += values * THREAD_STEP[key.name]
    else:
        raise LayoutError(f"cannot place axis {key.name}: an element's place is a thread and a register slot")


def region_slots(tile) -> set[int]:
    """The register slots that the elements of a tile's region occupy, in any thread.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> t = RegTile(PtxBuilder(), (32, 2, 2), "f32", TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]))
    >>> sorted(region_slots(t)), sorted(region_slots(t[:, 1:2]))
    ([0, 2, 4, 6], [2, 6])
    """
    _, slot = placements(tile.tile_layout, tile.shape)
    return set(slot[:, _keys(tile, []) >= 0].ravel().tolist())


class Holdings:
    """Which logical element of a tile each (thread, slot) holds, and where each element is.

    Elements are flat row-major indices over the whole tile's shape; threads count from 0
    in the CTA. A layout that puts two elements in one register is refused.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> from ptxkit.generators.layout import TileLayout, S, R, laneid
    >>> h = Holdings(RegTile(PtxBuilder(), (2,), "f32", TileLayout(S[2:1] + R[4 : 8 @ laneid])), "dst")
    >>> h.places(1), h.element(3, 0), h.warps
    ([(0, 1), (8, 1), (16, 1), (24, 1)], -1, 1)
    """

    def __init__(self, tile, name: str):
        self.shape = tuple(tile.shape)
        layout = tile.tile_layout
        try:
            self._thread, self._slot = placements(layout, self.shape)
        except LayoutError as err:
            raise ReductionError(f"{name}: {err}") from None
        if self._thread.min() < 0 or self._slot.min() < 0:
            raise ReductionError(f"the {name} layout {layout!r} places elements before thread 0 or slot 0")
        self.warps = int(self._thread.max()) // 32 + 1
        span = int(self._slot.max()) + 1
        flat = (self._thread * span + self._slot).ravel()
        elements = np.broadcast_to(np.arange(self._thread.shape[1]), self._thread.shape).ravel()
        table = np.full(32 * self.warps * span, NOWHERE, np.int64)
        table[flat] = elements
        if (table[flat] != elements).any():
            first = int(np.flatnonzero(table[flat] != elements)[0])
            thread, slot = divmod(int(flat[first]), span)
            pair = sorted((int(table[flat[first]]), int(elements[first])))
            raise ReductionError(
                f"the {name} layout {layout!r} puts elements {self.coord(pair[0])} and {self.coord(pair[1])} in "
                f"one register (slot {slot} of thread {thread})"
            )
        self.table = table.reshape(32 * self.warps, span).tolist()

    def places(self, element: int) -> list[tuple[int, int]]:
        """The (thread, slot) of every copy of `element`."""
        return list(zip(self._thread[:, element].tolist(), self._slot[:, element].tolist()))

    def element(self, thread: int, slot: int) -> int:
        """The element at (thread, slot), or `NOWHERE`."""
        row = self.row(thread)
        return row[slot] if 0 <= slot < len(row) else NOWHERE

    def row(self, thread: int) -> list[int]:
        """The element in each slot of `thread` (`NOWHERE` where there is none)."""
        return self.table[thread] if 0 <= thread < len(self.table) else [NOWHERE] * len(self.table[0])

    def coord(self, element: int) -> tuple[int, ...]:
        return tuple(split_index(element, self.shape))


class Meaning:
    """Which src elements meet in each dst element: src's spatial dims paired with dst's.

    `pairs` lists (src dim, dst dim) for the spatial dims that index dst; every other
    spatial dim of the src region has extent 1. Coordinates are relative to each region's
    start, so src and dst regions may start anywhere. A spatial position (a *key*) is
    the row-major index of the coordinates on the paired dims, -1 outside the region;
    `position` gives its coordinates. `expected` maps each key to its src elements
    (flat indices over the src tile).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder(); src, dst = RegTile(b, (2, 3), "f32"), RegTile(b, (2,), "f32")
    >>> meaning = Meaning(src, dst, [1], [(0, 0)])
    >>> meaning.expected[1], meaning.dst_key(1), meaning.src_key(2), meaning.position(1)
    ([3, 4, 5], 1, 0, (1,))
    """

    def __init__(self, src, dst, reduce_dims, pairs):
        self.src, self.dst, self.reduce_dims = src, dst, list(reduce_dims)
        self.pairs = list(pairs)
        self.extents = [src.extent[d] for d, _ in self.pairs]
        self._src_keys = _keys(src, [d for d, _ in self.pairs]).tolist()
        self._dst_keys = _keys(dst, [d for _, d in self.pairs]).tolist()
        self.expected: dict[int, list[int]] = {}
        keys = np.asarray(self._src_keys)
        order = np.argsort(keys, kind="stable")
        bounds = np.flatnonzero(np.diff(keys[order])) + 1
        for run in np.split(order, bounds):
            if len(run) and keys[run[0]] >= 0:
                self.expected[int(keys[run[0]])] = run.tolist()

    @classmethod
    def by_extents(cls, src, dst, reduce_dims) -> "Meaning | None":
        """The meaning when src's spatial extents, unit dims aside, are dst's in order; else None.

        >>> from ptxkit.generators.builder import PtxBuilder
        >>> from ptxkit.generators.regtile import RegTile
        >>> b = PtxBuilder(); src = RegTile(b, (4, 1, 8), "f32")
        >>> Meaning.by_extents(src, RegTile(b, (1, 4), "f32"), [2]).pairs, Meaning.by_extents(src, RegTile(b, (8,), "f32"), [2])
        ([(0, 1)], None)
        """
        spatial = [d for d in range(len(src.extent)) if d not in reduce_dims and src.extent[d] != 1]
        kept = [d for d in range(len(dst.extent)) if dst.extent[d] != 1]
        if [src.extent[d] for d in spatial] != [dst.extent[d] for d in kept]:
            return None
        return cls(src, dst, reduce_dims, list(zip(spatial, kept)))

    def position(self, key: int) -> tuple[int, ...]:
        """The coordinates on the paired dims of spatial position `key`."""
        return tuple(split_index(key, self.extents))

    def src_key(self, element: int) -> int:
        """The spatial position of a src element, or -1 outside the src region."""
        return self._src_keys[element]

    def dst_key(self, element: int) -> int:
        """The spatial position of a dst element, or -1 outside the dst region."""
        return self._dst_keys[element]

    def dst_elements(self) -> list[int]:
        """The dst region's elements (flat indices over the whole dst tile), row-major."""
        return [e for e, key in enumerate(self._dst_keys) if key >= 0]

    def at(self, key: int) -> str:
        """`` at spatial position (i, j)``, or nothing when the reduction has one position."""
        return "" if not self.pairs else f" at spatial position {self.position(key)}"

    def holds_only(self, values, key) -> bool:
        """True when every one of `values` is a src element at spatial position `key`."""
        return all(v != NOWHERE and self.src_key(v) == key for v in values)

    def describe(self, values) -> str:
        """Say which src elements a list of them is, in the words of the messages."""
        values = list(values)
        keys = Counter(self.src_key(v) if v != NOWHERE else None for v in values)
        if len(keys) == 1 and sorted(values) == self.expected.get(next(iter(keys)), None):
            return f"the {len(values)} src elements{self.at(next(iter(keys)))}"
        parts = []
        for key, count in keys.items():
            if key is None:
                parts.append(f"{count} from registers that hold no src element")
            elif key < 0:
                parts.append(f"{count} from outside the src region")
            else:
                parts.append(f"{count}{self.at(key)}")
        repeated = sum(n - 1 for v, n in Counter(values).items() if v != NOWHERE and n > 1)
        text = ", ".join(parts[:6]) + (", …" if len(parts) > 6 else "")
        return f"{len(values)} src values ({text}{f'; {repeated} counted twice or more' if repeated else ''})"


def _keys(tile, dims) -> np.ndarray:
    """Per element of `tile` (flat over its shape): the row-major index of its coordinates
    on `dims` relative to the region's start, or -1 outside the region."""
    coords = np.indices(tile.shape).reshape(len(tile.shape), -1)
    rel = coords - np.asarray(tile.start)[:, None]
    inside = ((rel >= 0) & (rel < np.asarray(tile.extent)[:, None])).all(axis=0)
    key = np.zeros(coords.shape[1], np.int64)
    for d in dims:
        key = key * tile.extent[d] + rel[d]
    return np.where(inside, key, -1)


def check_results(meaning: Meaning, dst: Holdings, result, how: str, together: bool = False) -> None:
    """Refuse unless every dst element ends with the reduction of exactly its src elements.

    ``result(thread, slot)`` lists the src elements (`NOWHERE` for a place that holds
    none) whose values the path combines into that dst register. With `together` the dst
    elements of one spatial position are per-thread partials: each must hold only src
    elements of its position, and together they must hold each of them once. `how` says
    what the path did, for the message.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder(); src, out = RegTile(b, (2, 3), "f32"), RegTile(b, (2,), "f32")
    >>> meaning = Meaning(src, out, [1], [(0, 0)])
    >>> check_results(meaning, Holdings(out, "dst"), lambda t, s: [3 * s, 3 * s + 1, 3 * s + 2], "the fold")
    >>> check_results(meaning, Holdings(out, "dst"), lambda t, s: [0, 1, 2], "the fold")
    Traceback (most recent call last):
    ...
    ptxkit.generators.analysis.ReductionError: the results do not land where the dst layout puts them: dst element (1,) is held by lane 0 (slot 1); after the fold, lane 0 holds the 3 src elements at spatial position (0,); reducing axes [1] it must hold the 3 src elements at spatial position (1,), each once
    """
    axes = meaning.reduce_dims
    groups: dict[int, list[int]] = {}
    holders: dict[int, list[tuple[int, int]]] = {}
    for element in meaning.dst_elements():
        key = meaning.dst_key(element)
        want = meaning.expected.get(key, [])
        first = None
        for place in dst.places(element):
            got = sorted(result(*place))
            if together:
                if first is None:
                    first = got
                    groups.setdefault(key, []).extend(got)
                    holders.setdefault(key, []).append(place)
                    bad = not meaning.holds_only(got, key)
                else:
                    bad = got != first
            else:
                bad = got != want
            if bad:
                raise ReductionError(
                    f"the {'partial ' if together else ''}results do not land where the dst layout puts them: dst "
                    f"element {dst.coord(element)} is held by {_threads(dst.places(element))}; after {how}, "
                    f"{_thread(place[0])} holds {meaning.describe(got)}; reducing axes {axes} it must hold "
                    + (f"only src elements{meaning.at(key)}, the same on every lane that holds it" if together
                       else f"the {len(want)} src elements{meaning.at(key)}, each once")
                )
    for key, got in groups.items():
        want = meaning.expected.get(key, [])
        if sorted(got) != want:
            raise ReductionError(
                f"the partial results do not land where the dst layout puts them: the dst elements"
                f"{meaning.at(key)} are held by {_threads(holders[key])}, which after {how} hold "
                f"{meaning.describe(got)}; reducing axes {axes} they must together hold the {len(want)} src "
                f"elements{meaning.at(key)}, each once"
            )


def _threads(places) -> str:
    threads = sorted({t for t, _ in places})
    slots = {s for _, s in places}
    slot = f" (slot {next(iter(slots))})" if len(slots) == 1 else ""
    warps = {t // 32 for t in threads}
    if len(threads) == 1:
        return _thread(threads[0]) + slot
    lanes = [t % 32 for t in threads] if len(warps) == 1 else threads
    runs, start = [], lanes[0]
    for a, b in zip(lanes, lanes[1:] + [None]):
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    text = ", ".join(runs[:8]) + (", …" if len(runs) > 8 else "")
    if len(warps) == 1:
        warp = next(iter(warps))
        return f"lanes {text}" + (f" of warp {warp}" if warp else "") + slot
    return f"threads {text}" + slot


def _thread(t: int) -> str:
    return f"lane {t}" if t < 32 else f"lane {t % 32} of warp {t // 32}"
