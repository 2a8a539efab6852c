"""The proxy-fence pass: insert ``fence.proxy.async*`` where generic-proxy writes may
reach async-proxy operations (wgmma, TMA / ``cp.async.bulk*``, tcgen05.mma/cp).

The library API (the contract other tools code against):

- `fence_module(module, options, rewrite=True) -> FenceReport` rewrites a parsed
  module in place (only the inserted lines change, plus the labels of created loop
  preheaders and the branches redirected to them) and says what it did and why; with
  ``rewrite=False`` it changes nothing and reports the missing fences (check mode).
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

import re
from dataclasses import asdict, dataclass, field

from ptxkit._gc import paused_gc
from ptxkit.cfg.graph import flow_graph
from ptxkit.cfg.placement import VARIANTS, PlannedFence, fence_text_for, plan_fences
from ptxkit.cfg.proxy import (
    AnalysisOptions, FunctionAnalysis, spaces_text,
)
from ptxkit.isa import parse_target
from ptxkit.syntax import Function

PLACEMENTS = ("hoist", "inline")
EXTERN_POLICIES = ("none", "clobber", "strict")


@dataclass(frozen=True)
class FenceOptions:
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
        indirect function may do (see `ptxkit.cfg.proxy.AnalysisOptions`).
    track_global:
        Also order generic writes of global memory before async reads of it.

    >>> FenceOptions(fence_variant="shared::cta").analysis.cta_fence_covers_cluster
    True
    >>> FenceOptions(placement="everywhere")
    Traceback (most recent call last):
    ValueError: placement must be one of hoist, inline, not 'everywhere'
    """

    placement: str = "hoist"
    fence_variant: str | None = None
    extern_policy: str = "clobber"
    track_global: bool = False

    def __post_init__(self):
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, not {self.placement!r}")
        if self.fence_variant is not None and self.fence_variant not in VARIANTS:
            raise ValueError(f"fence_variant must be one of {', '.join(VARIANTS)}, not {self.fence_variant!r}")
        if self.extern_policy not in EXTERN_POLICIES:
            raise ValueError(f"extern_policy must be one of {', '.join(EXTERN_POLICIES)}, not {self.extern_policy!r}")

    @property
    def analysis(self) -> AnalysisOptions:
        return AnalysisOptions(self.track_global, self.extern_policy, self.fence_variant == "shared::cta")


@dataclass
class Place:
    """A point of the input: 1-based line and column, and a short text.

    >>> str(Place(12, 5, "st.shared.u32")), str(Place(None, None, "an inserted block"))
    ('line 12 (st.shared.u32)', 'an inserted block')
    """

    line: int | None
    column: int | None
    text: str

    @classmethod
    def of(cls, node, text: str | None = None) -> "Place":
        position = node.position if node is not None else None
        line, column = position if position else (None, None)
        return cls(line, column, text if text is not None else _short(node))

    def __str__(self) -> str:
        if not self.line:
            return self.text
        return f"line {self.line} ({self.text})" if self.text else f"line {self.line}"


@dataclass
class FenceSite:
    """One inserted fence, or one missing fence in check mode, with its reason.

    `line`/`column`: the input statement the fence goes `where` ("before"/"after") it.
    `write`: the generic-proxy write; `target`: what it may reach unfenced, of
    `target_kind` ``async`` (an async-proxy op), ``call`` (a call whose callee reaches
    the async op `callee_target` unfenced) or ``extern`` (an extern call that may start
    async ops, under ``--extern-policy strict``); `path`: one CFG path from the write to
    the target, as places (the write, the start of each block in between, the target).

    >>> from pathlib import Path
    >>> text = Path("samples/fence/06b_tma_store_after_shared_store.ptx").read_text()
    >>> site = fence_text(text, "06b.ptx", rewrite=False)[1].missing[0]
    >>> site.text, site.where, site.line, site.write.line, site.path_text()
    ('fence.proxy.async.shared::cta;', 'before', 33, 32,
     'line 32 (st.shared.b16) -> line 33 (cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group)')
    """

    function: str
    line: int | None
    column: int | None
    where: str
    text: str
    variant: str
    placement: str
    spaces: str
    write: Place | None
    target: Place
    target_kind: str = "async"
    callee_target: Place | None = None
    path: list[Place] = field(default_factory=list)
    created_label: str | None = None

    def message(self) -> str:
        """One line: what goes where, and why."""
        return f"{self.variant} {self.where} line {self.line}: {self.reason()}"

    def reason(self) -> str:
        if self.target_kind == "call":
            target = f"the call at {self.target}, whose callee reaches the async-proxy access at {self.callee_target}"
        elif self.target_kind == "extern":
            target = f"the extern call at {self.target}, which may start async-proxy operations (extern policy strict)"
        else:
            target = f"the async-proxy access at {self.target}"
        source = f"generic-proxy write at {self.write}" if self.write else "a generic-proxy write"
        return f"{source} of {self.spaces} may reach {target} with no proxy fence in between"

    def path_text(self) -> str:
        return " -> ".join(str(place) for place in self.path)

    def explain(self) -> str:
        """A paragraph of prose for ``--explain``."""
        how = {
            "inline": "immediately before the async operation",
            "call": "in the caller, before the call",
            "loop": "once, in the loop preheader, instead of inside the loop",
            "branch": "once, before the conditional branch, instead of in every arm",
        }[self.placement]
        text = f"{self.text} goes {self.where} line {self.line}, {how}"
        if self.created_label:
            text += f" (a new block labelled {self.created_label}; outside branches into the loop now go there)"
        return f"{text}: the {self.reason()}.\n    path: {self.path_text()}"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class FenceReport:
    """What `fence_module` did (or, in check mode, found).

    >>> from pathlib import Path
    >>> text = Path("samples/fence/06b_tma_store_after_shared_store.ptx").read_text()
    >>> report = fence_text(text, "06b.ptx", rewrite=False)[1]
    >>> report.changed, len(report.missing), report.explain().splitlines()[0]
    (False, 1, '06b.ptx: 1 fence missing (placement: hoist)')
    """

    filename: str
    options: FenceOptions
    rewritten: bool
    fences: list[FenceSite] = field(default_factory=list)
    warnings: list[Place] = field(default_factory=list)
    skipped: str | None = None

    @property
    def changed(self) -> bool:
        """True when the module was rewritten (fences were inserted)."""
        return self.rewritten and bool(self.fences)

    @property
    def missing(self) -> list[FenceSite]:
        """In check mode, the fences that are missing (empty after a rewrite)."""
        return [] if self.rewritten else self.fences

    def to_json(self) -> dict:
        return {
            "file": self.filename,
            "options": asdict(self.options),
            "skipped": self.skipped,
            "changed": self.changed,
            "inserted" if self.rewritten else "missing": [f.to_json() for f in self.fences],
            "warnings": [asdict(w) for w in self.warnings],
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


def check_target(module) -> str | None:
    """Why the pass must leave `module` alone, or None when it may run.

    >>> import ptxkit
    >>> check_target(ptxkit.parse(".version 8.0\\n.target sm_80\\n.address_size 64\\n"))
    'target sm_80 is older than sm_90 (no async proxy)'
    """
    targets = [(name, parse_target(name)) for name in module.targets]
    sm = next(((name, parsed) for name, parsed in targets if parsed is not None), None)
    if sm is None:
        return "no sm_XY .target"
    if sm[1][0] < 90:
        return f"target {sm[0]} is older than sm_90 (no async proxy)"
    version = module.version
    if version is None or version < (8, 0):
        shown = ".".join(map(str, version)) if version else "missing"
        return f".version {shown} is older than 8.0 (fence.proxy.async needs PTX ISA 8.0)"
    return None


def fence_module(module, options: FenceOptions | None = None, rewrite: bool = True) -> FenceReport:
    """Insert the missing proxy fences of a parsed module (see the module docstring).

    With ``rewrite=False`` nothing changes and `FenceReport.missing` lists the fences
    the pass would insert. Raises `PtxSyntaxError` for malformed input (for example a
    branch to an unknown label).

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
    with paused_gc():
        results = _analyse(module, options, report)
        if rewrite:
            _rewrite(results, options)
    return report


def fence_text(text: str, filename: str = "<input>", rewrite: bool = True, **options) -> tuple[str, FenceReport]:
    """Parse PTX text, fence it and print it: ``(text, report)``.

    `options` are `FenceOptions` fields (``placement``, ``fence_variant``,
    ``extern_policy``, ``track_global``). With ``rewrite=False`` the text comes back
    unchanged and the report lists the missing fences.

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


# -- analysis over the call graph ------------------------------------------------------------


@dataclass
class FunctionResult:
    """One function's analysis (solved with its hoisted fences), its plan and report entries.

    >>> import ptxkit
    >>> result, = analyse_module(ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx"))
    >>> result.analysis.function.name, [p.placement for p in result.plans], result.sites[0].line, result.warnings
    ('k', ['loop'], 34, [])
    """

    analysis: FunctionAnalysis
    plans: list[PlannedFence]
    sites: list[FenceSite]
    warnings: list[Place]


def analyse_module(module, options: FenceOptions | None = None, everything: bool = False) -> list[FunctionResult]:
    """Analyse the functions with a body, callees before callers, and plan their fences.

    Changes nothing; `fence_module` applies the plans. Kernels whose text names no
    async-proxy operation and no call cannot need a fence and are left out, unless
    `everything` is set (the CFG drawing, `ptxkit.cfg.dot`, wants them all).

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<2>;\\n\\tst.shared.u32 [%r1], 0;\\n\\tret;\\n}\\n")
    >>> analyse_module(m), [r.analysis.function.name for r in analyse_module(m, everything=True)]
    ([], ['k'])
    """
    options = options or FenceOptions()
    functions = {f.name: f for f in module.functions if not f.is_declaration}
    if not everything:
        quiet = _quiet_kernels(module)
        functions = {name: f for name, f in functions.items() if f not in quiet}
    flows = {name: flow_graph(f) for name, f in functions.items()}
    defined = frozenset(functions)
    summaries: dict = {}
    results: list[FunctionResult] = []
    analysis_options = options.analysis
    for group, recursive in _callees_first(flows):
        for name in group:
            analysis = FunctionAnalysis(functions[name], analysis_options, summaries, recursive, defined,
                                        flow=flows[name])
            planned, scan = plan_fences(analysis, options.placement)
            if functions[name].kind == "func":
                summaries[name] = analysis.summary(scan)
            warnings = [Place.of(w.node, w.message) for w in analysis.warnings + scan.lint]
            sites = [_site(analysis, plan, options) for plan in planned]
            results.append(FunctionResult(analysis, planned, sites, warnings))
    order = {name: i for i, name in enumerate(functions)}
    results.sort(key=lambda r: order[r.analysis.function.name])
    return results


#: Text that every function needing a fence contains: an async-proxy opcode (also the
#: fail-closed unknown ones: ``.async``, ``wgmma.``, ``tcgen05.``) or a call.
_ASYNC_MARKERS = (".async", "mma_async", "wgmma.", "tcgen05.", "call")


def _quiet_kernels(module) -> set:
    """The ``.entry`` functions whose source text contains none of `_ASYNC_MARKERS`.

    A plain substring search over the raw text (comments included, so it can only err
    on the side of analysing): such a kernel has no op that could need a fence, and no
    caller needs its summary.
    """
    text = module.source.text
    items = module.items
    quiet = set()
    for index, item in enumerate(items):
        if type(item) is not Function or item.is_declaration or item.kind != "entry":
            continue
        end = items[index + 1].offset if index + 1 < len(items) else len(text)
        chunk = text[item.offset:end]
        if not any(marker in chunk for marker in _ASYNC_MARKERS):
            quiet.add(item)
    return quiet


def _analyse(module, options: FenceOptions, report: FenceReport) -> list[FunctionResult]:
    results = analyse_module(module, options)
    for result in results:
        report.fences.extend(result.sites)
        report.warnings.extend(result.warnings)
    report.fences.sort(key=lambda f: (f.line or 0, f.column or 0))
    report.warnings.sort(key=lambda w: (w.line or 0, w.column or 0))
    return results


def _callees(flow) -> set[str]:
    names = set()
    for instruction in flow.calls:
        for operand in instruction.operands:
            if operand.kind == "symbol":
                names.add(operand.name)
                break
    return names


def _callees_first(flows: dict) -> list[tuple[list[str], frozenset]]:
    """Functions grouped by call-graph cycle, callees before callers, each group with
    the names that are called recursively (empty for a function outside any cycle)."""
    calls = {name: _callees(flow) & flows.keys() for name, flow in flows.items()}
    if not any(calls.values()):
        return [([name], frozenset()) for name in flows]  # no calls between them: any order
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(flows)
    for name, callees in calls.items():
        graph.add_edges_from((name, callee) for callee in callees)
    condensed = nx.condensation(graph)
    order = list(nx.topological_sort(condensed))
    order.reverse()
    position = {name: i for i, name in enumerate(flows)}
    groups = []
    for component in order:
        members = sorted(condensed.nodes[component]["members"], key=position.__getitem__)
        cyclic = len(members) > 1 or members[0] in calls[members[0]]
        groups.append((members, frozenset(members) if cyclic else frozenset()))
    return groups


# -- report entries ----------------------------------------------------------------------------


def _site(analysis: FunctionAnalysis, plan: PlannedFence, options: FenceOptions) -> FenceSite:
    flow = analysis.flow
    variant = fence_text_for(plan.cover, options.fence_variant)
    text = f"{plan.guard} {variant};" if plan.guard is not None else f"{variant};"
    anchor, where = _anchor(flow, plan)
    first = plan.needs[0]
    target = Place.of(first.instruction)
    callee_target = None
    if first.kind == "call":
        exposed = first.detail.exposed_at
        op = next((exposed[bit] for bit in exposed if bit & first.spaces), None)
        callee_target = Place.of(op) if op is not None else None
    write, path = _describe_witness(analysis, plan.witness, first)
    position = anchor.position if anchor is not None else None
    return FenceSite(
        function=analysis.function.name,
        line=position[0] if position else None,
        column=position[1] if position else None,
        where=where,
        text=text,
        variant=variant,
        placement=plan.placement,
        spaces=spaces_text(first.spaces),
        write=write,
        target=target,
        target_kind=first.kind,
        callee_target=callee_target,
        path=path,
        created_label=None,
    )


def _anchor(flow, plan: PlannedFence):
    """The input node the fence goes before or after: (node, "before" | "after")."""
    if plan.placement == "loop" and plan.preheader.block is None:
        return plan.preheader.before, "before"
    block = flow.blocks[plan.block]
    if plan.position < len(block.instructions):
        return block.instructions[plan.position], "before"
    if block.instructions:
        return block.instructions[-1], "after"
    return block.labels[-1], "after"


def _describe_witness(analysis: FunctionAnalysis, witness, need) -> tuple[Place | None, list[Place]]:
    if witness is None:
        return None, [Place.of(need.instruction)]
    source_block, event, blocks = witness
    flow = analysis.flow
    source = flow.blocks[source_block].instructions[event.position]
    what = _short(source)
    if event.kind == "call":
        what = f"call to {event.detail.name} (its body writes through the generic proxy)"
    elif event.kind == "extern":
        what = f"call to {event.detail[0] or 'an indirect function'} (extern policy {event.detail[1]})"
    elif event.detail == "address":
        what = f"{_short(source)} (generic address)"
    write = Place.of(source, what)
    path = [write]
    for block in blocks[1:]:
        basic = flow.blocks[block]
        if basic.labels:
            path.append(Place.of(basic.labels[0], basic.name))
        elif basic.instructions and basic.instructions[0] is not need.instruction:
            path.append(Place.of(basic.instructions[0], ""))  # an unlabelled block: its line
    path.append(Place.of(need.instruction))
    return write, path


_OPCODE_TEXT = re.compile(r"(@!?\s*\S+\s+)?([^\s;]+)")
_CALLEE = re.compile(r"(?:^|,|\s)\s*([A-Za-z_$][\w$]*)\s*(?:,|;|$)")


def _short(node) -> str:
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


# -- rewriting ---------------------------------------------------------------------------------


_LABEL_OPERAND = re.compile(r"([A-Za-z_$%][\w$]*)(\s*;)$")


def _rewrite(results: list[FunctionResult], options: FenceOptions) -> None:
    """Apply the plans to the tree: fences and created preheader labels, then branches.

    Insertions go scope by scope from the last position to the first, with each
    anchor's position looked up once, so a function with thousands of fences is
    rewritten in linear time.
    """
    anchors = []
    for result in results:
        for plan, site in zip(result.plans, result.sites):
            anchor, where = _anchor(result.analysis.flow, plan)
            anchors.append((anchor, where, result.analysis, plan, site))
    edits = []
    by_scope: dict[int, list] = {}
    for entry in anchors:
        by_scope.setdefault(id(entry[0].parent), []).append(entry)
    for scope_edits in by_scope.values():
        items = scope_edits[0][0].parent.items
        scope_edits.sort(key=lambda entry: entry[0].offset if entry[0].offset is not None else -1)
        at = 0
        for anchor, where, analysis, plan, site in scope_edits:  # one pass over the scope, in source order
            at = _index_from(items, anchor, at)
            edits.append((id(anchor.parent), at + (where == "after") / 2, at, anchor, where, analysis, plan, site))
    edits.sort(key=lambda edit: (edit[0], -edit[1]))
    retargets: list = []
    used_labels: dict[int, set] = {}
    for _, _, at, anchor, where, analysis, plan, site in edits:
        _insert(analysis, plan, site, anchor, where, at, retargets, used_labels)
    for branch, label in retargets:
        match = _LABEL_OPERAND.search(branch.text)
        branch.replace(branch.text[: match.start(1)] + label + branch.text[match.end(1) :])


def _index_from(items: list, node, start: int) -> int:
    """The position of `node` in `items`, searching from `start` (then from the top)."""
    for index in range(start, len(items)):
        if items[index] is node:
            return index
    return items.index(node)


def _insert(analysis, plan: PlannedFence, site: FenceSite, anchor, where: str, at: int, retargets: list,
            used_labels: dict) -> None:
    """Insert one planned fence (and the label of a created preheader) next to `anchor`,
    which is item `at` of its scope."""
    if where == "before":
        node = anchor.insert_before(site.text, index=at)
    else:
        node = anchor.insert_after(site.text, index=at)
    if plan.placement == "loop" and plan.preheader.block is None:
        if plan.preheader.needs_label:
            names = used_labels.setdefault(id(analysis), {l.name for l in analysis.flow.label_blocks})
            label = _fresh_label(names)
            node.insert_before(f"{label}:", index=at)  # takes the header label's trivia and indentation
            site.created_label = label
            retargets.extend((analysis.flow.blocks[p].terminator, label) for p in plan.preheader.retarget)
        _indent_like(node, analysis.flow.blocks[plan.loop.header])


def _fresh_label(used: set) -> str:
    number = 0
    while f"$ptxkit_preheader_{number}" in used:
        number += 1
    name = f"$ptxkit_preheader_{number}"
    used.add(name)
    return name


def _indentation(block) -> str:
    for instruction in block.instructions:
        prefix = instruction.prefix
        newline = prefix.rfind("\n")
        if newline >= 0:
            return prefix[newline + 1 :]
    return "\t"


def _indent_like(node, block) -> None:
    """Give an inserted statement the indentation of `block`'s instructions."""
    prefix = node.prefix
    newline = prefix.rfind("\n")
    if newline >= 0:
        node.prefix = prefix[: newline + 1] + _indentation(block)
