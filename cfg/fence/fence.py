"""The proxy-fence pass: insert ``fence.proxy.async*`` where generic-proxy accesses may
race with async-proxy operations (wgmma, TMA / ``cp.async.bulk*``, tcgen05.mma/cp),
in one thread or handed between threads (docs/fence.md).

The library API (the contract other tools code against):

- `fence_module(module, options, rewrite=True, warn=True) -> FenceReport` rewrites a
  parsed module in place (only the inserted lines change, plus the labels of created
  loop preheaders and the branches redirected to them) and says what it did and why;
  with ``rewrite=False`` it changes nothing and reports the missing fences (check
  mode); with ``warn=False`` it looks for no copies in flight (the warnings only).
  `FenceReport.lines` maps the input's lines to the output's.
- `fence_text(text, filename, **options) -> (text, FenceReport)` parses, fences and
  prints.

The pass runs only on modules whose ``.target`` is sm_90 or newer and whose
``.version`` is 8.0 or newer (``fence.proxy.async`` needs both); other modules are
left untouched and `FenceReport.skipped` says why. Running it on its own output
changes nothing.

>>> text = (".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     "\\t.reg .b32 %r<2>;\\n\\t.reg .b64 %rd<3>;\\n\\t.reg .f32 %f<5>;\\n\\t.reg .pred %p<2>;\\n"
...     "\\tst.shared.u32 [%r1], 0;\\n\\twgmma.fence.sync.aligned;\\n"
...     "\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1, 1, 1, 0, 0;\\n"
...     "\\tret;\\n}\\n")
>>> fenced, report = fence_text(text, "k.ptx")
>>> print(fenced.splitlines()[10:13])
['\\twgmma.fence.sync.aligned;', '\\tfence.proxy.async.shared::cta;', '\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1, 1, 1, 0, 0;']
>>> report.fences[0].message()
'fence.proxy.async.shared::cta before line 12: generic-proxy write at line 10 (st.shared.u32) of shared::cta may reach the async-proxy access at line 12 (wgmma.mma_async) with no proxy fence in between'
>>> fence_text(fenced, "k.ptx")[1].changed
False
"""

from __future__ import annotations

from collections.abc import Iterator

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit._regex import compile as compile_pattern
from ptxkit.cfg.fence.options import EXTERN_POLICIES, FENCE_SIDES, PLACEMENTS, check_target
from ptxkit.cfg.fence.placement import RELEASE_INITS, VARIANTS, Placement, PlannedFence, fence_text_for, plan_fences
from ptxkit.cfg.fence.proxy import AnalysisOptions, Hazard, KernelAnalysis, Solution
from ptxkit.cfg.sync.events import Kind
from ptxkit.cfg.sync.locations import overlaps, spaces_text
from ptxkit.cfg.values.specials import PORTABLE_CLUSTER
from ptxkit.isa import may_need_fence
from ptxkit.syntax import Function

if TYPE_CHECKING:
    from typing import Any, TypeAlias

    from ptxkit.cfg.fence.proxy import Need, Step
    from ptxkit.cfg.flow.graph import BasicBlock, FlowGraph
    from ptxkit.cfg.flow.loops import Preheader
    from ptxkit.cfg.sync.locations import Location
    from ptxkit.edits import Insert, LineMap, Retarget
    from ptxkit.syntax import Module, Node

    #: One change to the text (`ptxkit.edits`): a fence inserted, or a branch sent to a created preheader.
    Edit: TypeAlias = "Insert | Retarget"
    #: A JSON object of the report (docs/report-format.md).
    Json = dict[str, object]


class _FenceFields(Record):
    placement: str = "hoist"
    fence_variant: str | None = None
    extern_policy: str = "clobber"
    track_global: bool = False
    fence_side: str = "issuer"
    war: bool = True
    max_cluster: int = PORTABLE_CLUSTER


class FenceOptions(_FenceFields):
    """How the pass places fences.

    placement:
        ``hoist`` (TileLang's: one fence in a loop preheader or before a branch when
        that replaces fences inside) or ``inline`` (always right before the op).
    fence_variant:
        None for the narrowest correct variant; ``shared::cta``, ``shared::cluster`` or
        ``full`` (``fence.proxy.async``) to force one. Forcing ``shared::cta`` also
        means an existing ``.shared::cta`` fence counts for both shared windows.
    extern_policy:
        ``none``, ``clobber`` (default) or ``strict``: what a call to an extern or
        indirect function may do (see `ptxkit.cfg.fence.proxy.AnalysisOptions`).
    track_global:
        Also order generic writes of global memory before async reads of it.
    fence_side:
        ``issuer`` (default: after the wait, right before the async op) or ``writer``
        (after the writer's last access, before the arrive that hands it over; across
        CTAs the fence stays with the issuer).
    war:
        Also fence generic reads before async writes of the same bytes (default on;
        off gives TileLang's behaviour).
    max_cluster:
        The most CTAs per cluster when the kernel declares no cluster size (8, the
        portable limit; 16 for non-portable launches).

    >>> FenceOptions(fence_variant="shared::cta").analysis.cta_fence_covers_cluster
    True
    >>> FenceOptions(placement="everywhere")
    Traceback (most recent call last):
    ValueError: placement must be one of hoist, inline, not 'everywhere'
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FenceOptions:  # the fields' own types, checked by super()'s
        self = super().__new__(cls, *args, **kwargs)
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, not {self.placement!r}")
        if self.fence_variant is not None and self.fence_variant not in VARIANTS:
            raise ValueError(f"fence_variant must be one of {', '.join(VARIANTS)}, not {self.fence_variant!r}")
        if self.extern_policy not in EXTERN_POLICIES:
            raise ValueError(f"extern_policy must be one of {', '.join(EXTERN_POLICIES)}, not {self.extern_policy!r}")
        if self.fence_side not in FENCE_SIDES:
            raise ValueError(f"fence_side must be one of {', '.join(FENCE_SIDES)}, not {self.fence_side!r}")
        if not 1 <= self.max_cluster <= 16:
            raise ValueError(f"max_cluster must be between 1 and 16, not {self.max_cluster!r}")
        return self

    @property
    def analysis(self) -> AnalysisOptions:
        return AnalysisOptions(self.track_global, self.extern_policy, self.fence_variant == "shared::cta", self.war,
                               self.max_cluster)


class Place(Record):
    """A point of the input: 1-based line and column, and a short text.

    >>> str(Place(12, 5, "st.shared.u32")), str(Place(None, None, "an inserted block"))
    ('line 12 (st.shared.u32)', 'an inserted block')
    """

    line: int | None
    column: int | None
    text: str

    @classmethod
    def of(cls, node: Node | None, text: str | None = None) -> Place:
        position = node.position if node is not None else None
        line, column = position if position else (None, None)
        return cls(line, column, text if text is not None else _short(node))

    def __str__(self) -> str:
        if not self.line:
            return self.text
        return f"line {self.line} ({self.text})" if self.text else f"line {self.line}"


class AccessPair(Record):
    """One (generic access, async operation) pair a fence orders, with its witness.

    `hazard`: ``raw`` (a generic write reaches an async-proxy access of its bytes),
    ``war`` (a generic read reaches an async-proxy write of its bytes) or
    ``mbarrier-init-cluster`` (an ``mbarrier.init`` of a barrier that other CTAs of the
    cluster use reaches an async op completing on it, with no release of the init at
    cluster scope). `access`: the
    generic access (None when the witness could not name one); `op`: the async op, of
    `op_kind` ``async`` or ``extern`` (a call that may start async ops, under
    ``--extern-policy strict``); `spaces`: the memory the access leaves pending;
    `handoff`: for an access made by another thread, the arrive and the wait it was
    handed over through; `path`: the witness, as places (the access, the start of each
    block in between, the arrive and the wait, the op); `fences`: the proxy fences the
    witness passes, which do not order the pair (of another space, or of the CTA where
    the cluster's is needed); `access_bytes`: the bytes the access stands for (its
    pending class, ``region[start:end]``), and `op_bytes` those of the op that meet them.

    >>> from pathlib import Path
    >>> text = Path("samples/fence/06b_tma_store_after_shared_store.ptx").read_text()
    >>> pair, = fence_text(text, "06b.ptx", rewrite=False)[1].missing[0].pairs
    >>> pair.hazard, pair.access.line, pair.op.line, pair.path_text()
    ('raw', 32, 33, 'line 32 (st.shared.b16) -> line 33 (cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group)')
    """

    hazard: str
    spaces: str
    access: Place | None
    op: Place
    op_kind: str = "async"
    handoff: tuple[Place, ...] = ()
    path: tuple[Place, ...] = ()
    fences: tuple[Place, ...] = ()
    access_bytes: str = ""
    op_bytes: tuple[str, ...] = ()

    def reason(self) -> str:
        """Why the pair needs a fence, in one sentence."""
        if self.op_kind == "extern":
            target = f"the extern call at {self.op}, which may start async-proxy operations (extern policy strict)"
        elif self.hazard == Hazard.WAR.value:
            target = f"the async-proxy write at {self.op}"
        elif self.hazard == Hazard.INIT_CLUSTER.value:
            target = (f"the async-proxy operation at {self.op}, which completes on that mbarrier, also in "
                      "other CTAs of the cluster, which use it")
        else:
            target = f"the async-proxy access at {self.op}"
        access = {Hazard.RAW.value: "generic-proxy write", Hazard.WAR.value: "generic-proxy read",
                  Hazard.INIT_CLUSTER.value: "mbarrier.init"}[self.hazard]
        source = f"{access} at {self.access}" if self.access else f"a {access}"
        hops = [f"{arrive}" + (f" and {wait}" if wait else "") for arrive, wait in self._hops()]
        unshown = "" if self._traced() else "hand-offs not shown, then "
        handed = f", handed to the issuing thread through {unshown}{', then '.join(hops)}" if hops else ""
        fence = "no fence.mbarrier_init.release.cluster or releasing cluster barrier" \
            if self.hazard == Hazard.INIT_CLUSTER.value else "no proxy fence"
        passed = " and ".join(str(place) for place in self.fences)
        unordered = f" that orders it ({passed} {'does' if len(self.fences) == 1 else 'do'} not)" if passed else ""
        return f"{source} of {self.spaces} may reach {target}{handed} with {fence} in between{unordered}"

    def _traced(self) -> bool:
        """True when the witness starts at the access: its way to the first arrive is
        shown (handed on more often than the witness follows, it starts at an arrive)."""
        return self.access is None or not self.path or self.path[0] == self.access

    def _hops(self) -> list[tuple[Place, Place | None]]:
        """The hand-offs, earliest first: (arrive, wait), the wait None when the witness
        names only an arrive."""
        return [(self.handoff[i], self.handoff[i + 1] if i + 1 < len(self.handoff) else None)
                for i in range(0, len(self.handoff), 2)]

    def path_text(self) -> str:
        """The witness path; ``=>`` marks each hand-off from one thread to another."""
        waits = {id(wait) for _, wait in self._hops() if wait is not None}
        out: list[str] = []
        for place in self.path:
            joint = " => " if out and id(place) in waits else " -> "
            out.append((joint if out else "") + str(place))
        return "".join(out)

    def threads_text(self) -> str:
        """Who does what along a hand-off: thread A makes the access and arrives, each
        next thread waits (and arrives again), the last issues the async operation. A
        witness that names the access without its way to the first arrive (handed on more
        often than the witness follows, `ptxkit.cfg.fence.proxy`) says so.

        >>> at = Place(7, 2, "st.shared.u32")
        >>> arrive, wait, op = Place(8, 2, "bar.arrive"), Place(20, 2, "bar.sync"), Place(21, 2, "wgmma")
        >>> traced = AccessPair("raw", "shared::cta", at, op, handoff=(arrive, wait), path=(at, arrive, wait, op))
        >>> traced.threads_text().split("; ")[0], traced._replace(path=(arrive, wait, op)).threads_text().split("; ")[0]
        ('thread A makes the access and arrives at line 8 (bar.arrive)', 'the access reaches thread A through hand-offs not shown')
        """
        hops = self._hops()
        parts = [f"thread A makes the access and arrives at {hops[0][0]}" if self._traced() else
                 f"the access reaches thread A through hand-offs not shown; thread A arrives at {hops[0][0]}"]
        for number, ((_, wait), (arrive, _)) in enumerate(zip(hops, hops[1:]), 1):
            parts.append(f"thread {chr(65 + number)} waits at {wait} and arrives at {arrive}")
        parts.append(f"thread {chr(65 + len(hops))} waits at {hops[-1][1]} and issues the async operation")
        return "; ".join(parts)

    def to_json(self) -> Json:
        return {**self._asdict(), "access": self.access._asdict() if self.access is not None else None,
                "op": self.op._asdict(), "handoff": [place._asdict() for place in self.handoff],
                "path": [place._asdict() for place in self.path], "fences": [place._asdict() for place in self.fences],
                "op_bytes": list(self.op_bytes)}


class FenceSite(Record):
    """One inserted fence, or one missing fence in check mode, with every pair it orders.

    `line`/`column`: the input statement the fence goes `where` ("before"/"after") it.
    `pairs`: the (generic access, async op) pairs the fence orders (`AccessPair`), one
    per async op it serves, first the one the fence was planned for; `hazard` and
    `reason` are that first pair's.

    >>> import ptxkit
    >>> site, = fence_module(ptxkit.parse_file("samples/fence/13_hoist_out_of_if.ptx"), rewrite=False).fences
    >>> site.text, site.where, site.line, site.hazard, [(p.access.line, p.op.line) for p in site.pairs]
    ('fence.proxy.async.shared::cta;', 'before', 35, 'raw', [(32, 36), (32, 39)])
    """

    function: str
    line: int | None
    column: int | None
    where: str
    text: str
    variant: str
    placement: str
    pairs: tuple[AccessPair, ...]
    created_label: str | None = None

    @property
    def hazard(self) -> str:
        """The hazard of the first pair."""
        return self.pairs[0].hazard

    def reason(self) -> str:
        """Why the fence is needed: the first pair's reason, how many more it orders, and
        `scope_note`."""
        more = len(self.pairs) - 1
        return self.pairs[0].reason() + (f" (and {more} more async-proxy operation{'s' * (more != 1)})"
                                         if more else "") + self.scope_note()

    def scope_note(self) -> str:
        """Why a ``.shared::cluster`` fence orders accesses that are all of the CTA's own
        shared memory ('' for any other fence): the other CTAs make the same accesses in
        theirs and hand them across, and the op reaches their bytes too (docs/fence.md §5.3).

        >>> import ptxkit
        >>> site, = fence_module(ptxkit.parse_file(
        ...     "samples/fence/h28b_cluster_barrier_handoff_to_multicast_copy.ptx"), rewrite=False).fences
        >>> site.pairs[0].spaces, site.scope_note().split(":")[0]
        ('shared::cta', '; the other CTAs of the cluster make the same access in their own shared memory')
        """
        if not self.variant.endswith(".shared::cluster") or any("cluster" in pair.spaces for pair in self.pairs):
            return ""
        return ("; the other CTAs of the cluster make the same access in their own shared memory: it reaches "
                "this CTA's issuing thread through the cluster too, and the operation touches their bytes as "
                "well, which only .shared::cluster orders (docs/fence.md §5.3)")

    def message(self) -> str:
        """One line: what goes where, and why."""
        return f"{self.variant} {self.where} line {self.line}: {self.reason()}"

    def explain(self) -> str:
        """A paragraph of prose for ``--explain``: where the fence goes, then each pair."""
        how = {
            "inline": "immediately before the async operation",
            "init": "right after the mbarrier.init, once, instead of before each async operation completing on it",
            "call": "in the caller, before the call",
            "writer": "in the writing thread, before the arrive that hands the access over",
            "access": "once, right after the accesses, instead of before each async operation they reach",
            "loop": "once, in the loop preheader, instead of inside the loop",
            "branch": "once, before the conditional branch, instead of in every arm",
        }[self.placement]
        text = f"{self.text} goes {self.where} line {self.line}, {how}"
        if self.created_label:
            text += f" (a new block labelled {self.created_label}; outside branches into the loop now go there)"
        lines = [] if len(self.pairs) == 1 else [f"{text}; it orders {len(self.pairs)} pairs:"]
        for number, pair in enumerate(self.pairs, 1):
            lead = f"{text}: " if len(self.pairs) == 1 else f"    ({number}) "
            lines.append(f"{lead}{'the ' if pair.access else ''}{pair.reason()}.")
            lines.append(f"    path: {pair.path_text()}")
            if pair.handoff and len(pair.handoff) % 2 == 0:
                lines.append(f"    {pair.threads_text()}")
            if pair.access_bytes:
                theirs = f"; the operation, {', '.join(pair.op_bytes)}" if pair.op_bytes else ""
                lines.append(f"    bytes: the access, {pair.access_bytes}{theirs}")
        return "\n".join(lines)

    def to_json(self) -> Json:
        return {**self._asdict(), "hazard": self.hazard, "pairs": [pair.to_json() for pair in self.pairs]}


#: The version of `FenceReport.to_json`'s shape (docs/report-format.md); it goes up when a
#: key changes meaning or goes away, not when one is added.
REPORT_VERSION = 1


class FenceWarning(Record):
    """Something the pass met that no fence can put right, at `line`:`column`: `kind`
    ``in-flight`` (an async op may read shared memory a ``cp.async`` is still writing:
    no fence waits for it) or ``unknown-opcode`` (an async-looking opcode the pass does
    not know, taken as touching all shared memory).

    >>> from pathlib import Path
    >>> text = Path("samples/fence/02b_cp_async_without_wait.ptx").read_text()
    >>> warning, = fence_text(text, "02b.ptx", rewrite=False)[1].warnings
    >>> warning.kind, warning.line
    ('in-flight', 37)
    """

    kind: str
    line: int | None
    column: int | None
    text: str

    @classmethod
    def of(cls, kind: str, node: Node | None, text: str) -> FenceWarning:
        place = Place.of(node, text)
        return cls(kind, place.line, place.column, text)


class FenceReport:
    """What `fence_module` did (or, in check mode, found).

    `edits` are the planned insertions (`ptxkit.edits`), applied in a rewrite and kept
    in check mode for `apply`; `lines` maps the input's line numbers to the output's
    (`ptxkit.edits.LineMap`; None until the edits are applied).

    >>> from pathlib import Path
    >>> text = Path("samples/fence/06b_tma_store_after_shared_store.ptx").read_text()
    >>> report = fence_text(text, "06b.ptx", rewrite=False)[1]
    >>> report.changed, len(report.missing), report.explain().splitlines()[0]
    (False, 1, '06b.ptx: 1 fence missing (placement: hoist)')
    """

    def __init__(self, filename: str, options: FenceOptions, rewritten: bool) -> None:
        self.filename, self.options, self.rewritten = filename, options, rewritten
        self.fences: list[FenceSite] = []
        self.warnings: list[FenceWarning] = []
        self.skipped: str | None = None
        self.edits: list[Edit] = []
        self.lines: LineMap | None = None

    def __repr__(self) -> str:
        return f"<FenceReport {self.filename}: {len(self.fences)} fences, rewritten={self.rewritten}>"

    def apply(self) -> LineMap:
        """Apply the planned edits to the module (once); returns the `LineMap`. Check
        mode uses it to show what a rewrite would give without analysing again.

        >>> import ptxkit
        >>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
        >>> report = fence_module(m, rewrite=False)
        >>> report.apply().new(35), str(m).splitlines()[34]
        (36, '\\tfence.proxy.async.shared::cta;')
        """
        from ptxkit.edits import apply_edits

        if self.lines is None:
            self.lines = apply_edits(self.edits)
        return self.lines

    @property
    def changed(self) -> bool:
        """True when the module was rewritten (fences were inserted)."""
        return self.rewritten and bool(self.fences)

    @property
    def missing(self) -> list[FenceSite]:
        """In check mode, the fences that are missing (empty after a rewrite)."""
        return [] if self.rewritten else self.fences

    def to_json(self) -> Json:
        """The report as data, in the same shape whether fences were inserted or only
        found (docs/report-format.md; `REPORT_VERSION`).

        >>> import ptxkit
        >>> report = fence_module(ptxkit.parse_file("samples/fence/13_hoist_out_of_if.ptx"), rewrite=False)
        >>> data = report.to_json()
        >>> data["version"], data["mode"], data["changed"], [len(f["pairs"]) for f in data["fences"]]
        (1, 'check', False, [2])
        """
        return {
            "version": REPORT_VERSION,
            "file": self.filename,
            "mode": "fence" if self.rewritten else "check",
            "options": self.options._asdict(),
            "skipped": self.skipped,
            "changed": self.changed,
            "fences": [f.to_json() for f in self.fences],
            "warnings": [w._asdict() for w in self.warnings],
        }

    def explain(self) -> str:
        """The report in prose."""
        if self.skipped:
            return f"{self.filename}: left unchanged: {self.skipped}\n"
        verb = "inserted" if self.rewritten else "missing"
        lines = [f"{self.filename}: {len(self.fences)} fence{'s' * (len(self.fences) != 1)} {verb} "
                 f"(placement: {self.options.placement})"]
        for number, fence in enumerate(self.fences, 1):
            lines.append(f"  {number}. [{fence.function}] {fence.explain()}")
        for warning in self.warnings:
            lines.append(f"  warning at line {warning.line}: {warning.text}")
        return "\n".join(lines) + "\n"


def fence_module(module: Module, options: FenceOptions | None = None, rewrite: bool = True,
                 warn: bool = True) -> FenceReport:
    """Insert the missing proxy fences of a parsed module (see the module docstring).

    With ``rewrite=False`` nothing changes and `FenceReport.missing` lists the fences
    the pass would insert. With ``warn=False`` the report has no in-flight warnings
    (`Solution.in_flight` is not asked: the ptxas wrapper and the Triton hook show none).
    Raises `PtxSyntaxError` for malformed input (for example a branch to an unknown
    label).

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
    >>> report = fence_module(m, FenceOptions(placement="inline"))
    >>> report.changed, [(f.placement, f.line) for f in report.fences], str(m).splitlines()[35]
    (True, [('inline', 36)], '\\tfence.proxy.async.shared::cta;')
    """
    options = options or FenceOptions()
    report = FenceReport(module.filename, options, rewrite)
    report.skipped = check_target(module)
    if report.skipped:
        return report
    for result in analyse_module(module, options, warn=warn):
        report.fences.extend(result.sites)
        report.warnings.extend(result.warnings)
        report.edits.extend(result.edits)
        del result  # its analysis goes back before the next function's is built (`analyse_module`)
    report.fences.sort(key=lambda f: (f.line or 0, f.column or 0))
    report.warnings.sort(key=lambda w: (w.line or 0, w.column or 0))
    if rewrite:
        report.apply()
    return report


def fence_text(text: str, filename: str = "<input>", rewrite: bool = True,
               **options: object) -> tuple[str, FenceReport]:
    """Parse PTX text, fence it and print it: ``(text, report)``.

    `options` are `FenceOptions` fields (``placement``, ``fence_variant``,
    ``extern_policy``, ``track_global``, ``fence_side``, ``war``). With
    ``rewrite=False`` the text comes back unchanged and the report lists the missing
    fences.

    >>> from pathlib import Path
    >>> text = Path("samples/fence/14b_hoist_out_of_loop.ptx").read_text()
    >>> fenced, report = fence_text(text, "14b.ptx")
    >>> fenced.splitlines()[34:36], report.fences[0].placement
    (['\\tfence.proxy.async.shared::cta;', 'L:'], 'loop')
    """
    from ptxkit import parse

    module = parse(text, filename)
    report = fence_module(module, FenceOptions(**options), rewrite=rewrite)
    return (str(module) if report.changed else text), report


# -- analysis of every kernel -----------------------------------------------------------------


class FunctionResult(Record):
    """One function's analysis, its plan, the solution with every planned fence in place
    (whose states the reports, explanations and drawings read), report entries and the
    edits that apply the plan.

    >>> import ptxkit
    >>> result, = analyse_module(ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx"))
    >>> result.analysis.function.name, [p.placement.value for p in result.plans], result.sites[0].line, result.warnings
    ('k', ['loop'], 34, [])
    """

    solution: Solution
    plans: list[PlannedFence]
    sites: list[FenceSite]
    warnings: list[FenceWarning]
    edits: "list[Edit]"

    @property
    def analysis(self) -> KernelAnalysis:
        """The function's analysis, the one its solution was solved from."""
        return self.solution.analysis

    def planned_graph(self) -> tuple[FlowGraph, list[int], list[int], list[int]]:
        """The function's graph as its edits leave it, for the drawings (``ptxkit cfg``,
        the DOT): ``(graph, ins, outs, blocks)``, where each loop preheader the plan
        creates is a new block on the loop's entry edges (`FlowGraph.with_blocks_before`),
        `ins`/`outs` are the solved states at every block's start and end, and `blocks`
        the block each plan's fence goes in.

        >>> import ptxkit
        >>> result, = analyse_module(ptxkit.parse_file("samples/fence/x16_created_preheader.ptx"))
        >>> graph, ins, outs, blocks = result.planned_graph()
        >>> len(result.analysis.flow), len(graph), blocks, graph.succ[blocks[0]] == [result.plans[0].loop.header]
        (4, 5, [4], True)
        """
        from ptxkit.cfg.fence.placement import entry_edges

        solution = self.solution
        flow = self.analysis.flow
        created = [(plan, preheader) for plan in self.plans if (preheader := _created_preheader(plan)) is not None]
        if not created:
            return flow, solution.ins, solution.outs, [plan.block for plan in self.plans]
        graph = flow.with_blocks_before([(plan.block, entry_edges(flow, preheader.loop))
                                         for plan, preheader in created])
        ins, outs = list(solution.ins), list(solution.outs)
        for plan, _ in created:
            before, after = solution.edge_states(plan.block)
            ins.append(before)
            outs.append(after)
        new = iter(range(len(flow), len(graph)))
        return graph, ins, outs, [next(new) if plan.on_entry_edges else plan.block for plan in self.plans]


def analyse_module(module: Module, options: FenceOptions | None = None,
                   everything: bool = False, warn: bool = True) -> Iterator[FunctionResult]:
    """Analyse every kernel (with the functions it calls inlined) and every function
    no kernel calls, and plan their fences. Changes nothing.

    The results come one function at a time, each as soon as its fences are planned: a
    caller that keeps only what it needs of each (`fence_module`: the report entries and
    edits) holds one function's analysis at a time, so its memory peaks at the largest
    function's, not at the sum over the module's kernels.

    Kernels whose text names no async-proxy operation and no call cannot need a fence
    and are left out, unless `everything` is set (the CFG drawing, `ptxkit.cfg.fence.dot`,
    wants them all, called functions too, each on its own).

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<2>;\\n\\tst.shared.u32 [%r1], 0;\\n\\tret;\\n}\\n")
    >>> list(analyse_module(m)), [r.analysis.function.name for r in analyse_module(m, everything=True)]
    ([], ['k'])
    """
    from ptxkit.cfg.flow.inline import call_target, inlined_graph
    from ptxkit.instruction import head_of

    options = options or FenceOptions()
    functions = {f.name: f for f in module.functions if not f.is_declaration}
    called: set[str | None] = set()  # None: a call through a register
    for function in functions.values():
        if "call" in _text_of(module, function):  # only a text that names a call can hold one
            for instruction in function.instructions():
                if "call" in instruction.text and head_of(instruction)[2] == "call":  # operands only of calls
                    called.add(call_target(instruction)[0])
    if everything:
        roots = list(functions.values())
    else:
        quiet = _quiet_kernels(module)
        roots = [f for f in functions.values() if (f.kind == "entry" or f.name not in called) and f not in quiet]
    used_labels: set[str] = set()
    for function in roots:
        yield _function_result(KernelAnalysis(function, options.analysis, flow=inlined_graph(function, functions)),
                               options, used_labels, warn)


def _function_result(analysis: KernelAnalysis, options: FenceOptions, used_labels: set[str],
                     warn: bool = True) -> FunctionResult:
    """`analysis`'s planned fences, their report entries, edits and warnings (in-flight
    ones only with `warn`; a function of its own, so that `analyse_module`'s frame keeps
    no reference to an analysis while it builds the next one)."""
    plans, solution = plan_fences(analysis, options.placement, options.fence_side)
    warnings = [FenceWarning.of("unknown-opcode", node, message) for node, message in analysis.warnings]
    if warn:
        warnings += [FenceWarning.of("in-flight", node, message) for node, message in solution.in_flight()]
    sites, edits = _sites_and_edits(analysis, plans, options, used_labels)
    return FunctionResult(solution, plans, sites, warnings, edits)


def _text_of(module: Module, function: Function) -> str:
    items = module.items
    source: str = module.source.text
    index = next(i for i, item in enumerate(items) if item is function)
    end = items[index + 1].offset if index + 1 < len(items) else len(source)
    return source[function.offset:end]


def _quiet_kernels(module: Module) -> set[Function]:
    """The ``.entry`` functions whose source text `ptxkit.isa.may_need_fence` passes over.

    A plain substring search over the raw text (comments included, so it can only err
    on the side of analysing): such a kernel has no op that could need a fence.
    """
    text: str = module.source.text
    items = module.items
    quiet: set[Function] = set()
    for index, item in enumerate(items):
        if type(item) is not Function or item.is_declaration or item.kind != "entry":
            continue
        end = items[index + 1].offset if index + 1 < len(items) else len(text)
        chunk = text[item.offset:end]
        if not may_need_fence(chunk):
            quiet.add(item)
    return quiet


# -- report entries and edits ------------------------------------------------------------------


def _sites_and_edits(analysis: KernelAnalysis, plans: list[PlannedFence], options: FenceOptions,
                     used_labels: set[str]) -> tuple[list[FenceSite], list[Edit]]:
    from ptxkit.edits import Insert, Retarget

    sites: list[FenceSite] = []
    edits: list[Edit] = []
    flow = analysis.flow
    labels: set[str] | None = None
    for plan in plans:
        variant = RELEASE_INITS if plan.releases_inits else fence_text_for(plan.cover, options.fence_variant)
        text = f"{plan.guard} {variant};" if plan.guard is not None else f"{variant};"
        anchor, where = _anchor(flow, plan)
        label = None
        indent = None
        preheader = _created_preheader(plan)
        if preheader is not None:  # the preheader block, labelled where branches go to it
            if preheader.needs_label:
                if labels is None:
                    labels = {l.name for l in flow.label_blocks} | used_labels
                label = _fresh_label(labels)
                used_labels.add(label)
                edits.extend(Retarget(flow.blocks[p].terminator, label) for p in preheader.retarget)
            indent = _indentation(flow.blocks[preheader.loop.header])
        edits.append(Insert(anchor, text, after=where == "after", label=label, indent=indent))
        sites.append(_site(analysis, plan, variant, text, anchor, where, label))
    return sites, edits


def _created_preheader(plan: PlannedFence) -> Preheader | None:
    """The preheader the edits create for a loop fence on the loop's entry edges
    (`PlannedFence.on_entry_edges`), or None for any other fence."""
    return plan.preheader if plan.on_entry_edges else None


def _site(analysis: KernelAnalysis, plan: PlannedFence, variant: str, text: str, anchor: Node | None,
          where: str, label: str | None) -> FenceSite:
    position = anchor.position if anchor is not None else None
    return FenceSite(
        function=analysis.function.name,
        line=position[0] if position else None,
        column=position[1] if position else None,
        where=where,
        text=text,
        variant=variant,
        placement=plan.placement.value,
        pairs=tuple(_pair(analysis, need, witness) for need, witness in zip(plan.needs, plan.witnesses)),
        created_label=label,
    )


def _pair(analysis: KernelAnalysis, need: Need, witness: list[Step]) -> AccessPair:
    """The `AccessPair` of one need the fence serves, from its witness."""
    path: list[Place] = []
    handoff: list[Place] = []
    access: Place | None = None
    touched: Location | None = None  # the access's bytes
    flow = analysis.flow
    for step in witness:
        touched = step.location or touched
        for block in step.via[1:]:  # the start of each block passed on the way here
            basic = flow.blocks[block]
            if basic.labels:
                path.append(Place.of(basic.labels[0], basic.name))
            elif basic.instructions and basic.instructions[0] is not step.instruction:
                path.append(Place.of(basic.instructions[0], ""))
        place = Place.of(step.instruction)
        if step.what == "origin":  # handed on through other threads: no path shown up to the arrive
            access = place
            continue
        if step.what in ("arrive", "wait"):
            handoff.append(place)
        elif step.what != "op":
            access = place
        path.append(place)
    return AccessPair(
        hazard=need.hazard.value,
        spaces=spaces_text(analysis.spaces_of(need.pending)),
        access=access,
        op=Place.of(need.instruction),
        op_kind=need.kind,
        handoff=tuple(handoff),
        path=tuple(path),
        fences=tuple(_fences_passed(analysis, witness)),
        access_bytes=_bytes_text(touched) if touched is not None else "",
        op_bytes=_bytes_met(need, touched),
    )


def _bytes_met(need: Need, touched: Location | None) -> tuple[str, ...]:
    """The bytes of `need`'s async op that meet `touched`: what it reads and writes, and
    the mbarrier it completes on (an init's pair meets the op there)."""
    if touched is None:
        return ()
    event = need.event
    footprint = (*event.locations, *event.writes, *((event.mbarrier,) if event.mbarrier is not None else ()))
    met = [location for location in footprint if overlaps(location, touched)]
    return tuple(dict.fromkeys(_bytes_text(location) for location in met))


def _bytes_text(location: Location) -> str:
    """Bytes in words: ``region[start:end]``, or any byte of the spaces where the value
    analysis could not place them.

    >>> from ptxkit.cfg.sync.locations import CTA, everywhere
    >>> _bytes_text(everywhere(CTA))
    'anywhere in shared::cta'
    """
    return str(location) if location.region is not None else f"anywhere in {location}"


def _fences_passed(analysis: KernelAnalysis, witness: list[Step]) -> list[Place]:
    """The proxy fences on the witness's way within each thread, from each stop to the
    next one whose `Step.via` names the blocks between (an arrive after an ``origin``, or a
    wait after its arrive, has none). A fence there does not order the pair, or the
    witness would not pass it: it orders other spaces, or the CTA's shared memory where
    the pair needs the cluster's (CUTLASS's sm100 tile scheduler fences its read of the
    cancel response ``.shared::cta``, docs/fence.md §8)."""
    flow = analysis.flow
    found: list[Place] = []
    for previous, step in zip(witness, witness[1:]):
        if not step.via:
            continue
        start = flow.blocks[previous.block].instructions.index(previous.instruction)
        stop = flow.blocks[step.block].instructions.index(step.instruction)
        last = len(step.via) - 1
        for index, block in enumerate(step.via):
            low = start + 1 if index == 0 else 0
            high = stop if index == last else len(flow.blocks[block].instructions)
            found.extend(Place.of(flow.blocks[block].instructions[event.position]) for event in analysis.events[block]
                         if event.kind is Kind.FENCE and low <= event.position < high)
    return found


def _anchor(flow: FlowGraph, plan: PlannedFence) -> tuple[Node | None, str]:
    """The input node the fence goes before or after: (node, "before" | "after")."""
    if plan.anchor is not None:
        return plan.anchor, "after" if plan.placement is Placement.ACCESS else "before"
    preheader = _created_preheader(plan)
    if preheader is not None:
        return preheader.before, "before"
    block = flow.blocks[plan.block]
    if plan.position < len(block.instructions):
        return block.instructions[plan.position], "before"
    if block.instructions:
        return block.instructions[-1], "after"
    if block.labels:
        return block.labels[-1], "after"
    return _returning_call(flow, block), "after"


def _returning_call(flow: FlowGraph, block: BasicBlock) -> Node | None:
    """The call an empty, unlabelled block continues after: the block an inlined
    callee returns to (docs/fence.md §6) starts right after its call instruction."""
    for pred in flow.pred[block.index]:
        context = flow.blocks[pred].context
        while context is not None and context.parent is not block.context:
            context = context.parent
        if context is not None:
            return context.call
    raise AssertionError(f"block {block.index} is empty but follows no call")


_OPCODE_TEXT = compile_pattern(r"(@!?\s*\S+\s+)?([^\s;]+)")
_CALLEE = compile_pattern(r"(?:^|,|\s)\s*([A-Za-z_$][\w$]*)\s*(?:,|;|$)")


def _short(node: Node | None) -> str:
    """An instruction's opcode (with its guard), e.g. ``@%p1 st.shared.u32``."""
    if node is None:
        return "?"
    text = node.text.strip()
    match = _OPCODE_TEXT.match(text)
    if match is None:
        return text
    guard, opcode = match.group(1) or "", match.group(2)
    if opcode.startswith("wgmma.mma_async"):
        opcode = opcode.split(".sync")[0]  # the shape and types add nothing here
    elif opcode.startswith("call"):
        callee = _CALLEE.search(text[match.end():])
        if callee:
            opcode += " " + callee.group(1)
    return guard + opcode


def _fresh_label(used: set[str]) -> str:
    number = 0
    while f"$ptxkit_preheader_{number}" in used:
        number += 1
    name = f"$ptxkit_preheader_{number}"
    used.add(name)
    return name


def _indentation(block: BasicBlock) -> str:
    for instruction in block.instructions:
        prefix = instruction.prefix
        newline = prefix.rfind("\n")
        if newline >= 0:
            return prefix[newline + 1:]
    return "\t"
