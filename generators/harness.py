"""The register-image harness: wrap a generator in an ``.entry`` kernel and check it with numpy.

Each thread of the kernel loads every physical slot of its src (and dst) registers
from a global "image" (``image[thread, slot]``), runs the generator, and stores its dst
slots back. On the host, `fill` writes a logical tensor into an image through the
layout (every replica copy; gaps keep a sentinel) and `ImageRun` reads every replica
copy of every dst element back, so a test checks all lanes that should hold a result
and that no gap was written.

A case can run several independent *copies* in one CTA (a warp layout on 4 warps, a
thread-only layout on 32 threads), each with its own data.

>>> import numpy as np
>>> from ptxkit.generators.layout import TileLayout, S, R, laneid
>>> from ptxkit.generators.dispatch import reduce_local
>>> case = ImageCase("warp_sum", TileSpec((32,), "f32", TileLayout(S[32 : 1 @ laneid])),
...                  TileSpec((1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid])),
...                  lambda dst, src: reduce_local(dst, src, op="sum", scope="warp"), copies=2)
>>> case.threads, case.total_threads
(32, 64)
>>> a, b = case.inputs(np.random.default_rng(0))
>>> run = case.run(a, b, simulator(module_text([case])))
>>> run.assert_close(a.sum(axis=1, keepdims=True), atol=1e-4)
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

from . import simulate
from .accuracy import assert_within
from .builder import PtxBuilder, module_text as _module_text
from .dtypes import dtype as as_dtype, from_bits, to_bits
from .layout import TileLayout, S
from .placement import placements
from .regtile import RegTile

#: bit patterns that gaps must keep (NaNs with a payload, or an unlikely integer)
SENTINELS = {"f32": 0x7FC0DEAD, "f16": 0x7E5A, "bf16": 0x7FA5, "s32": 0x5A5A5A5A, "u32": 0xA5A5A5A5}
_LOAD = {".f32": "f32", ".b16": "b16", ".b32": "b32"}
_UINT = {2: np.uint16, 4: np.uint32}


@dataclass(frozen=True)
class TileSpec:
    """A register tile to allocate: shape, dtype, layout (None: a plain row-major buffer).

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> TileSpec((4, 8)).tile_layout, TileSpec((32, 2, 2), "f32", TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)])).span
    (S[(4, 8) : (8, 1)], 7)
    """

    shape: tuple
    dtype: str = "f32"
    layout: TileLayout | None = None

    @property
    def tile_layout(self) -> TileLayout:
        return self.layout if self.layout is not None else TileLayout(S[tuple(self.shape)])

    @property
    def span(self) -> int:
        return self.tile_layout.storage().span()


@dataclass
class ImageCase:
    """One generated kernel: tiles, the generator call ``generate(dst, src)``, copies, target.

    ``dst=None`` runs the generator with dst and src the same tile; `read_as` then reads
    the result through another view of those registers. `select_for` chooses
    instructions as for an older target (see `PtxBuilder`).

    >>> from ptxkit.generators.dispatch import reduce_local
    >>> case = ImageCase("row_max", TileSpec((4, 8)), TileSpec((4,)),
    ...                  lambda d, s: reduce_local(d, s, axes=1, op="max"), copies=2)
    >>> case.threads, case.total_threads, case.entry()[0].splitlines()[0]
    (1, 2, '.visible .entry row_max(')
    """

    name: str
    src: TileSpec
    dst: TileSpec | None
    generate: Callable
    copies: int = 1
    target: str = "sm_90a"
    select_for: str | None = None
    read_as: TileSpec | None = None

    @property
    def out(self) -> TileSpec:
        """The spec through which the result is read: `read_as`, else dst, else src."""
        if self.read_as is not None:
            return self.read_as
        return self.dst if self.dst is not None else self.src

    @property
    def threads(self) -> int:
        """Threads per copy: 1 for thread-only layouts, else the threads the layouts name,
        rounded up to whole warps."""
        highest = max(int(placements(spec.tile_layout, spec.shape)[0].max()) for spec in (self.src, self.out))
        return 1 if highest == 0 else -(-(highest + 1) // 32) * 32

    @property
    def total_threads(self) -> int:
        return self.threads * self.copies

    # ---- the kernel -------------------------------------------------------------------------
    def entry(self) -> tuple[str, tuple[int, int]]:
        """The ``.entry`` text and the PTX version it needs."""
        b = PtxBuilder(self.target, self.select_for)
        src = RegTile(b, self.src.shape, self.src.dtype, self.src.layout)
        dst = src if self.dst is None else RegTile(b, self.dst.shape, self.dst.dtype, self.dst.layout)
        tid = b.reg(".b32")
        b.ins("mov.u32", tid, "%tid.x")
        bases = {}
        for name, tile in (("src_img", src), ("dst_img", dst)):
            base, offset = b.reg(".b64"), b.reg(".b64")
            b.ins("ld.param.u64", base, f"[{name}]")
            b.ins("cvta.to.global.u64", base, base)
            b.ins("mul.wide.u32", offset, tid, len(tile.regs) * tile.dtype.nbytes)
            b.ins("add.s64", base, base, offset)
            bases[name] = base
        for name, tile in (("src_img", src), ("dst_img", dst)) if dst is not src else (("src_img", src),):
            for slot, reg in enumerate(tile.regs):
                b.ins(f"ld.global.{_LOAD[tile.dtype.reg_type]}", reg, f"[{bases[name]}+{slot * tile.dtype.nbytes}]")
        self.generate(dst, src)
        out = bases["dst_img"] if dst is not src else bases["src_img"]
        for slot, reg in enumerate(dst.regs):
            b.ins(f"st.global.{_LOAD[dst.dtype.reg_type]}", f"[{out}+{slot * dst.dtype.nbytes}]", reg)
        return b.entry(self.name, [(".u64", "src_img"), (".u64", "dst_img")]), b.version

    # ---- host side ----------------------------------------------------------------------------
    def inputs(self, rng, low: float = 0.0, high: float = 1.0):
        """Random src values and initial dst values (half of src's scale), per copy,
        already rounded to the dtypes: ``(a[copies, *src.shape], b[copies, *out.shape])``."""
        a = _random(rng, self.src, self.copies, low, high)
        b = _random(rng, self.dst or self.src, self.copies, low * 0.5, high * 0.5)
        return a, b

    def images(self, a, b):
        """(src image, dst image) for logical values `a` (src) and `b` (dst); in place: (src image, None)."""
        threads = self.threads
        if self.dst is None:
            return fill(self.src, a, threads), None
        return fill(self.src, a, threads), fill(self.dst, b, threads)

    def run(self, a, b, runner) -> "ImageRun":
        """Run on `runner` (`simulator` or `gpu_runner`) and read the dst image back."""
        src_image, dst_image = self.images(a, b)
        after = src_image if dst_image is None else dst_image
        before = after.copy()
        runner(self.name, [src_image, after], self.total_threads)
        return ImageRun(self.out, after, before, self.threads)


class ImageRun:
    """The dst image after a run, read through the dst layout.

    >>> from ptxkit.generators.dispatch import reduce_local
    >>> case = ImageCase("row_sum", TileSpec((2, 3)), TileSpec((2,)), lambda d, s: reduce_local(d, s, axes=1))
    >>> run = case.run(np.array([[[1.0, 2, 3], [4, 5, 6]]]), np.zeros((1, 2)), simulator(module_text([case])))
    >>> run.values.tolist()                 # [copies, replicas, elements]
    [[[6.0, 15.0]]]
    """

    def __init__(self, spec: TileSpec, after: np.ndarray, before: np.ndarray, threads: int):
        self.spec = spec
        thread, slot = placements(spec.tile_layout, spec.shape)
        copies = after.shape[0] // threads
        rows = thread[None] + threads * np.arange(copies)[:, None, None]
        columns = np.broadcast_to(slot[None], rows.shape)
        self.elements = after[rows, columns]  # [copies, replicas, elements], in the image's dtype
        written = np.zeros(after.shape, bool)
        written[rows, columns] = True
        owners = written.any(axis=1, keepdims=True)  # threads that hold part of the tile
        unsigned = _UINT[after.dtype.itemsize]
        self.changed_gaps = owners & ~written & (after.view(unsigned) != before.view(unsigned))

    @property
    def values(self) -> np.ndarray:
        """Every replica copy of every element: float64 (or int64) [copies, replicas, elements]."""
        return from_bits(self.spec.dtype, self.elements)

    def assert_gaps_kept(self) -> None:
        """Slots outside the layout, in threads that hold part of it, still hold what was
        loaded (the sentinel). Threads outside the layout run the same code on nothing:
        their registers are not checked."""
        if self.changed_gaps.any():
            rows, slots = np.nonzero(self.changed_gaps)
            raise AssertionError(f"{len(rows)} gap slots were written, e.g. thread {rows[0]} slot {slots[0]}")

    def assert_close(self, expected, atol=0.0, rtol: float = 0.0) -> None:
        """Every replica copy matches `expected` [copies, *shape] (NaNs must match too), and
        the gaps are intact. `atol` is a number or one per element ([copies, *shape])."""
        self.assert_gaps_kept()
        got = self.values
        want = np.broadcast_to(np.asarray(expected, np.float64).reshape(got.shape[0], 1, -1), got.shape)
        if np.ndim(atol):
            atol = np.asarray(atol, np.float64).reshape(got.shape[0], 1, -1)
        assert_within(got, want, atol + rtol * np.abs(want) if rtol else atol, "values [copy, replica, element]")


def fill(spec: TileSpec, values, threads: int) -> np.ndarray:
    """The image [copies·threads, span] holding `values` [copies, *shape]; gaps hold the sentinel.

    >>> from ptxkit.generators.layout import R, laneid
    >>> image = fill(TileSpec((2,), "f32", TileLayout(S[2:1] + R[2 : 16 @ laneid])), [[1.0, 2.0]], threads=32)
    >>> image.shape, image[0].tolist(), image[16].tolist(), image[1].tolist()
    ((32, 2), [1.0, 2.0], [1.0, 2.0], [nan, nan])
    """
    t = as_dtype(spec.dtype)
    values = np.asarray(values).reshape(len(values), -1)
    copies = len(values)
    image = np.full((copies * threads, spec.span), SENTINELS[t.name], dtype=_UINT[t.nbytes])
    thread, slot = placements(spec.tile_layout, spec.shape)
    rows = thread[None] + threads * np.arange(copies)[:, None, None]
    columns = np.broadcast_to(slot[None], rows.shape)
    if len(np.unique(rows * spec.span + columns)) != rows.size:
        raise ValueError(f"layout {spec.tile_layout!r} puts two elements in one slot")
    image[rows, columns] = to_bits(t, values).view(_UINT[t.nbytes])[:, None, :]
    return image.view(t.numpy)


def _random(rng, spec: TileSpec, copies: int, low: float, high: float):
    t = as_dtype(spec.dtype)
    shape = (copies, *spec.shape)
    if not t.is_float:
        return rng.integers(-1000 if t.name == "s32" else 0, 1000, size=shape).astype(np.float64)
    return from_bits(t, to_bits(t, rng.uniform(low, high, size=shape))).reshape(shape)


# ---- runners ----------------------------------------------------------------------------------
def module_text(cases) -> str:
    """One module holding every case's entry (they must share a target).

    >>> cases = [ImageCase(name, TileSpec((4,)), TileSpec((1,)), lambda d, s: None) for name in ("k0", "k1")]
    >>> text = module_text(cases)
    >>> text.splitlines()[:2], text.count(".entry")
    (['.version 8.0', '.target sm_90a'], 2)
    """
    targets = {case.target for case in cases}
    if len(targets) != 1:
        raise ValueError(f"cases for several targets in one module: {sorted(targets)}")
    entries, versions = zip(*(case.entry() for case in cases))
    return _module_text(list(entries), targets.pop(), max(versions))


def simulator(text: str):
    """A runner for the entries of `text` on the simulator (no GPU): ``run(name, arrays,
    threads)`` launches one CTA; every array is a global buffer, updated in place.

    >>> from ptxkit.generators.dispatch import reduce_local
    >>> case = ImageCase("row_sum", TileSpec((2, 3)), TileSpec((2,)), lambda d, s: reduce_local(d, s, axes=1))
    >>> src, dst = case.images(np.array([[[1.0, 2, 3], [4, 5, 6]]]), np.zeros((1, 2)))
    >>> simulator(module_text([case]))("row_sum", [src, dst], case.total_threads); dst.tolist()
    [[6.0, 15.0]]
    """
    import ptxkit

    module = ptxkit.parse(text, "<generated>")

    def run(name, arrays, threads):
        simulate.launch(module, name, *arrays, block=threads)

    return run


def gpu_runner(text: str, arch: str = "sm_90a"):
    """The same runner on the GPU: `text` is assembled once with ptxas, then each call copies
    the arrays in (one device buffer per distinct array), launches one CTA and copies them back.

    >>> from ptxkit.generators.dispatch import reduce_local
    >>> case = ImageCase("row_sum", TileSpec((2, 3)), TileSpec((2,)), lambda d, s: reduce_local(d, s, axes=1))
    >>> runner = gpu_runner(module_text([case]))  # doctest: +SKIP
    >>> case.run(np.array([[[1.0, 2, 3], [4, 5, 6]]]), np.zeros((1, 2)), runner).values.tolist()  # doctest: +SKIP
    [[[6.0, 15.0]]]
    """
    import ptxkit
    from ptxkit import runtime

    module = runtime.load(ptxkit.assemble(text, arch=arch))

    def run(name, arrays, threads):
        devices = {}
        for array in arrays:
            if id(array) not in devices:
                devices[id(array)] = runtime.DeviceArray.from_numpy(array)
        module.kernel(name).launch(*(devices[id(a)] for a in arrays), grid=1, block=threads)
        for array in arrays:
            array[...] = devices[id(array)].to_numpy()

    return run


def sass_counts(cubin: bytes, mnemonic: str = "SHFL") -> dict[str, int]:
    """How many SASS instructions of `mnemonic` each kernel of a cubin has (``cuobjdump -sass``).

    Raises FileNotFoundError when cuobjdump is not on PATH nor next to ptxas.

    >>> import ptxkit
    >>> from ptxkit.generators.parity import shuffle_count_cases
    >>> case, shuffles = shuffle_count_cases()[0]; case.name, shuffles
    ('shfl_count_f32_1_w_32', 5)
    >>> cubin = ptxkit.assemble(module_text([case])).data   # doctest: +SKIP
    >>> sass_counts(cubin)                                  # doctest: +SKIP
    {'shfl_count_f32_1_w_32': 5}
    """
    import os
    import re
    import shutil
    import subprocess
    import tempfile

    tool = shutil.which("cuobjdump")
    if tool is None:
        from ptxkit.ptxas import find_ptxas

        tool = os.path.join(os.path.dirname(find_ptxas().path), "cuobjdump")
        if not os.path.exists(tool):
            raise FileNotFoundError("cuobjdump is not on PATH nor next to ptxas")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "k.cubin")
        with open(path, "wb") as handle:
            handle.write(cubin)
        listing = subprocess.run([tool, "-sass", path], capture_output=True, text=True, check=True).stdout
    counts: dict[str, int] = {}
    name = None
    for line in listing.splitlines():
        header = re.match(r"\s*Function : (\S+)", line)
        if header:
            name = header.group(1)
            counts[name] = 0
        elif name is not None and re.search(rf"\b{mnemonic}\.", line):
            counts[name] += 1
    return counts
