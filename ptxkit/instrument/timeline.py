"""``timeline``: when each warp enters and leaves the phases of a kernel.

A pass on the rewrite API (docs/rewrite.md). Each chosen point is a pair of records
(begin, end) that lane 0 of each recorded warp writes into its CTA's region of the
buffer (`ptxkit.instrument.layout`: ``%globaltimer``, ``%clock``, the warp and the
point; `snippets.timeline_record`). Points (`points`, comma-separated):

- ``function``: the kernel, from entry to every return;
- ``barrier``: each ``bar.sync``/``barrier.sync``/``barrier.cluster.wait``;
- ``mbarrier``: each mbarrier wait; a spin loop made of the wait and plain arithmetic
  is bracketed as a whole (on its entry and exit edges);
- ``wgmma``: each ``wgmma.wait_group``;
- ``tma``: TMA and bulk-copy issue (``cp.async.bulk*``, ``cp.reduce.async.bulk*``):
  a run of them in one block, or a loop that does nothing else, as one span;
- `region`: ``NAME=FROM:TO`` for the blocks from label FROM up to label TO (``FROM:``:
  up to the return), and
  ``NAME=[FILE:]A-B`` for the blocks holding code of source lines A to B (``.loc``):
  begun on every edge into the blocks, ended on every edge out.

`ptxkit.trace.Trace` turns the buffer into spans, a Chrome/Perfetto trace and a picture.

>>> import ptxkit
>>> m = ptxkit.parse_file("samples/hopper/ws_mbarrier.ptx")
>>> plan = timeline(m, points="function,mbarrier,wgmma", capacity=256)
>>> [point[:2] for point in plan.info["layouts"]["ws_mbarrier"]["points"]]
[['kernel', 'function'], ['mbarrier wait @77', 'mbarrier'], ['mbarrier wait @125', 'mbarrier'], ['wgmma wait @148', 'wgmma']]
"""

from __future__ import annotations

import re

from ptxkit.cfg.flow.graph import ENTRY, EXIT
from ptxkit.instruction import head_of
from ptxkit.rewrite import Plan, match

from .kernels import buffer_of, kernels, source_of
from .layout import HEADER_BYTES, MARK, POINT_MASK, RECORD_BYTES, Layout, Point
from .snippets import TimelineRegisters, first_slots, register_types, timeline_exit, timeline_record, timeline_setup

POINTS = ("function", "barrier", "mbarrier", "wgmma", "tma")
#: opcodes (before the first dot) that only compute: a loop of them and one kind of
#: point (a spin wait, a TMA issue loop) is bracketed as a whole
PLAIN = frozenset({"mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not", "neg", "min", "max",
                   "setp", "selp", "cvt", "cvta", "bra", "nanosleep", "prmt", "bfe", "bfi"})
_REGION = re.compile(r"(?P<name>[^=]+)=(?:(?P<first>[$%\w.]+):(?P<last>[$%\w.]*)|(?:(?P<file>.+):)?(?P<a>\d+)-(?P<b>\d+))")


def timeline(module, kernel=None, points: str = "function,barrier,mbarrier,wgmma,tma", region=(),
             capacity: int = 1024, chunk: int = 8, warps: int | None = None, buffer: str = "param") -> Plan:
    """Record the chosen points (see the module docstring) of every kernel of `module`
    (or those named by `kernel`). `region`: one spec or a list; `capacity`: records
    per CTA (more are dropped and counted); `chunk`: slots a warp takes at a time;
    `warps`: record every `warps`-th warp only (None: all); `buffer` as for
    `ptxkit.instrument.count.count`. The layouts go into ``plan.info["layouts"]`` and
    into the output (``// ptxkit-instrument:`` lines)."""
    capacity, chunk = int(capacity), int(chunk)
    warps = None if warps in (None, "", 0, "0") else int(warps)
    chosen = [p.strip() for p in points.split(",") if p.strip()] if isinstance(points, str) else list(points)
    unknown = sorted(set(chosen) - set(POINTS))
    if unknown:
        raise ValueError(f"unknown point kinds {', '.join(unknown)} (kinds: {', '.join(POINTS)})")
    if capacity < 1 or chunk < 1:
        raise ValueError("capacity and chunk must be at least 1")
    regions = [region] if isinstance(region, str) else list(region)
    plan = Plan(module)
    layouts = {}
    for k in kernels(plan, kernel):
        sites = _sites(k, chosen, regions)
        if len(sites) > POINT_MASK:
            raise ValueError(f"{k.name}: {len(sites)} points, more than a record can name")
        regs = TimelineRegisters(**{name: k.fresh_register(kind, "tl_" + name)
                                    for name, kind in register_types(TimelineRegisters).items()})
        where = buffer_of(plan, k, buffer)
        threads = max_threads(k.function)
        first = first_slots(capacity, chunk, threads)
        k.insert(k.entry(), timeline_setup(regs, where, HEADER_BYTES + capacity * RECORD_BYTES, warps, first))

        def record(positions, point, end):
            k.insert(positions, timeline_record(regs, point, end, capacity, chunk, first * -(-threads // 32)))

        # ends before begins where one point ends as the next begins; the kernel's span outermost
        function = [i for i, (point, _, _) in enumerate(sites) if point.category == "function"]
        for i in function:
            record(sites[i][1], i, False)
        for i, (_, _, ends) in enumerate(sites):
            if i not in function:
                record(ends, i, True)
        for i, (_, begins, _) in enumerate(sites):
            if i not in function:
                record(begins, i, False)
        k.insert(k.returns(), timeline_exit(regs))
        for i in function:
            record(sites[i][2], i, True)
        layout = Layout.timeline(k.name, [p for p, _, _ in sites], capacity, chunk, where, warps)
        plan.comment(MARK + layout.to_json())
        layouts[k.name] = layout.to_dict()
    plan.info["layouts"] = layouts
    return plan


def max_threads(function) -> int:
    """The most threads a block of `function` may have: its ``.reqntid`` or ``.maxntid``,
    else 1024 (the hardware's limit).

    >>> import ptxkit
    >>> max_threads(ptxkit.parse_file("samples/hopper/ws_tma_pipeline.ptx").function("ws_tma_pipeline"))
    256
    """
    from ptxkit.instruction import parse_number

    for name, value in function.signature.directives:
        if name in (".reqntid", ".maxntid"):
            product = 1
            for part in value.split(","):
                product *= int(parse_number(part.strip()))
            return product
    return 1024


def _sites(k, chosen: list[str], regions: list[str]) -> list[tuple[Point, list, list]]:
    """(point, begin positions, end positions) of every point of kernel `k`."""
    sites = []
    if "function" in chosen:
        sites.append((Point("kernel", "function", k.function.line), [k.entry()], k.returns()))
    for spec in regions:
        sites.append(_region(k, spec))
    found = []
    if "barrier" in chosen:
        found += [("barrier", i) for i in k.find(match.barrier_wait())]
    if "mbarrier" in chosen:
        found += [("mbarrier", i) for i in k.find(match.mbarrier_wait())]
    if "wgmma" in chosen:
        found += [("wgmma", i) for i in k.find(match.opcode("wgmma.wait_group"))]
    if "tma" in chosen:
        found += [("tma", i) for i in k.find(match.opcode("cp.async.bulk") | match.opcode("cp.reduce.async.bulk"))]
    found.sort(key=lambda item: item[1].line or 0)
    done: set[int] = set()
    for category, instruction in found:
        if id(instruction) in done:
            continue
        group, begins, ends = _bracket(k, category, instruction)
        done.update(id(i) for i in group)
        name = {"barrier": instruction.opcode.replace(".aligned", ""), "mbarrier": "mbarrier wait",
                "wgmma": "wgmma wait", "tma": "TMA issue"}[category] + f" @{instruction.line}"
        sites.append((Point(name, category, instruction.line, source_of(k, instruction)), begins, ends))
    return sites


def _bracket(k, category: str, instruction) -> tuple[list, list, list]:
    """(the instructions one span covers, begin positions, end positions) of a point:
    a loop of plain arithmetic and points of this category as a whole; for TMA issue,
    else the run of issues in the block; else the instruction itself."""
    facts, flow = k.facts, k.flow
    block = facts.block_of(instruction)
    same = _category_matcher(category)
    if category in ("mbarrier", "tma"):
        loop = facts.loops.innermost().get(block)
        if loop is not None and block not in facts.loops.irreducible:
            body = [i for b in sorted(loop.blocks) for i in flow.blocks[b].instructions]
            if all(same(i, facts) or head_of(i)[2] in PLAIN for i in body):
                begins = [k.on_edge(u, loop.header) for u in _predecessors(flow, loop.header) if u not in loop.blocks]
                ends = [k.on_edge(u, v) for u in sorted(loop.blocks) for v in _successors(flow, u)
                        if v not in loop.blocks]
                return [i for i in body if same(i, facts)], begins, ends
    if category == "tma":
        run = [instruction]
        instructions = flow.blocks[block].instructions
        for later in instructions[instructions.index(instruction) + 1:]:
            if same(later, facts):
                run.append(later)
            elif head_of(later)[2] not in PLAIN or later is flow.blocks[block].terminator:
                break
        return run, [k.before(run[0])], [k.after(run[-1])]
    return [instruction], [k.before(instruction)], [k.after(instruction)]


def _category_matcher(category: str):
    return {"mbarrier": match.mbarrier_wait(),
            "tma": match.opcode("cp.async.bulk") | match.opcode("cp.reduce.async.bulk")}.get(category, match.everything())


def _predecessors(flow, block: int) -> list:
    return ([ENTRY] if block == flow.start else []) + sorted(set(flow.pred[block]))


def _successors(flow, block: int) -> list:
    return sorted(set(flow.succ[block])) + ([EXIT] if block in flow.exits else [])


def _region(k, spec: str) -> tuple[Point, list, list]:
    """A named region: ``NAME=FROM:TO`` (labels; no TO: until the function returns) or
    ``NAME=[FILE:]A-B`` (source lines)."""
    parsed = _REGION.fullmatch(spec.strip())
    if parsed is None:
        raise ValueError(f"region {spec!r}: expected NAME=FROM:TO or NAME=FROM: (labels), or NAME=[FILE:]A-B "
                         "(source lines)")
    flow = k.flow
    name = parsed.group("name").strip()
    if parsed.group("first"):
        start = _label_block(k, parsed.group("first"))
        stop = _label_block(k, parsed.group("last")) if parsed.group("last") else None
        blocks, stack = set(), [start]
        while stack:  # what runs from FROM until control reaches TO
            block = stack.pop()
            if block == stop or block in blocks:
                continue
            blocks.add(block)
            stack.extend(flow.succ[block])
        line = flow.blocks[start].line
    else:
        wanted = range(int(parsed.group("a")), int(parsed.group("b")) + 1)
        file = parsed.group("file")
        blocks = {b.index for b in flow.blocks for i in b.instructions if _in_lines(k, i, wanted, file)}
        if not blocks:
            raise ValueError(f"region {spec!r}: no instruction of {k.name} has a .loc in lines "
                             f"{wanted.start}-{wanted.stop - 1}")
        line = min(flow.blocks[b].line or 0 for b in blocks)
    begins = [k.on_edge(u, v) for v in sorted(blocks) for u in _predecessors(flow, v) if u not in blocks]
    ends = [k.on_edge(u, v) for u in sorted(blocks) for v in _successors(flow, u) if v not in blocks]
    return Point(name, "region", line), begins, ends


def _label_block(k, name: str) -> int:
    for label, block in k.flow.label_blocks.items():
        if label.name == name:
            return block
    raise ValueError(f"region: no label {name!r} in {k.name}")


def _in_lines(k, instruction, lines: range, file: str | None) -> bool:
    loc = k.facts.locs.loc(instruction)
    if loc is None or loc.line not in lines:
        return False
    return file is None or k.facts.locs.files.get(loc.file, "").endswith(file)
