"""Graphviz DOT (and SVG) drawings of control-flow graphs with their proxy state.

Each basic block shows its label and first line, the proxy state on entry and exit,
and its instructions, with the ones that matter to the fence pass marked: generic
writes ``[generic]``, async-proxy ops ``[async]``, existing proxy fences ``[fence]``,
and the fences the pass inserts (``+ fence.proxy.async…``, in red). Back edges are bold.

>>> import ptxkit
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .b32 %r<2>;\\n\\tst.shared.u32 [%r1], 0;\\n\\tcp.async.bulk.tensor.1d.global.shared::cta"
...     ".bulk_group [%rd1, {%r1}], [%r1];\\n\\tret;\\n}\\n")
>>> text = module_dot(m)
>>> text.splitlines()[0], "+ fence.proxy.async.shared::cta;" in text
('digraph "k" {', True)
"""

from __future__ import annotations

import shutil
import subprocess

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.graph import ENTRY, EXIT

if TYPE_CHECKING:
    from ptxkit.cfg.fence.fence import FenceOptions, FenceSite, FunctionResult
    from ptxkit.cfg.flow.graph import BasicBlock
    from ptxkit.cfg.sync.events import Event
    from ptxkit.syntax import Module

    #: A fence the plan inserts into a block: the position it goes before, and its report entry.
    Inserted = tuple[int, FenceSite]

#: At most this many instructions are listed per block (the first ones and the last).
MAX_LINES = 14


def module_dot(module: Module, options: FenceOptions | None = None, function: str | None = None) -> str:
    """DOT for one function (`function`) or all functions with a body (one cluster each).

    `options` are `FenceOptions`; the planned fences are what ``ptxkit fence`` would
    insert with them. Raises `KeyError` for an unknown function name.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.func f()\\n{\\n\\tret;\\n}\\n"
    ...     ".visible .entry k()\\n{\\n\\tcall f;\\n\\tret;\\n}\\n")
    >>> module_dot(m).count("subgraph"), module_dot(m, function="f").splitlines()[0]
    (2, 'digraph "f" {')
    """
    from ptxkit.cfg.fence.fence import analyse_module

    results = list(analyse_module(module, options, everything=True))
    if function is not None:
        module.function(function)  # KeyError listing the names when absent
        results = [r for r in results if r.analysis.function.name == function]
        if not results:
            raise KeyError(f"{function!r} is a declaration without a body")
    if len(results) == 1:
        name = results[0].analysis.function.name
        return f'digraph "{_escape(name)}" {{\n' + _graph_attributes() + _function_body(results[0], "") + "}\n"
    out = [f'digraph "{_escape(module.filename)}" {{\n', _graph_attributes()]
    for number, result in enumerate(results):
        name = _escape(result.analysis.function.name)
        out.append(f'  subgraph "cluster_{number}" {{\n    label="{name}";\n')
        out.append(_function_body(result, f"f{number}_"))
        out.append("  }\n")
    out.append("}\n")
    return "".join(out)


def render_svg(dot_text: str) -> str:
    """Render DOT to SVG with Graphviz's ``dot``; `FileNotFoundError` when it is missing.

    >>> svg = render_svg('digraph { a -> b }')  # doctest: +SKIP
    >>> "<svg" in svg and "</svg>" in svg  # doctest: +SKIP
    True
    """
    program = shutil.which("dot")
    if program is None:
        raise FileNotFoundError("the Graphviz 'dot' program is not on PATH")
    done = subprocess.run([program, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"dot failed: {done.stderr.strip()}")
    return done.stdout


def _graph_attributes() -> str:
    return ('  node [shape=box, fontname="monospace", fontsize=10];\n'
            '  edge [fontname="monospace", fontsize=9];\n')


def _function_body(result: FunctionResult, prefix: str) -> str:
    analysis = result.analysis
    flow, ins, outs, blocks = result.planned_graph()  # with the loop preheaders the plan creates
    inserted: dict[int, list[Inserted]] = {}
    for plan, at, site in zip(result.plans, blocks, result.sites):
        inserted.setdefault(at, []).append((plan.position, site))
    rank = {block: i for i, block in enumerate(flow.rpo)}
    out = [f'  {prefix}entry [shape=oval, label="entry"];\n', f'  {prefix}exit [shape=oval, label="exit"];\n']
    for block in flow.blocks:
        b = block.index
        lines = [_title(block)]
        if b in rank:
            lines.append("in:  " + analysis.state_text(ins[b]))
        else:
            lines.append("(unreachable)")
        lines.extend(_statements(block, analysis.events[b] if b < len(analysis.events) else [], inserted.get(b, [])))
        if b in rank:
            lines.append("out: " + analysis.state_text(outs[b]))
        style = ', color="red", penwidth=2' if b in inserted else ""
        label = "".join(_escape(line) + "\\l" for line in lines)
        out.append(f'  {prefix}b{b} [label="{label}"{style}];\n')
    for (u, v), kind in flow.kinds.items():
        source = f"{prefix}entry" if u == ENTRY else f"{prefix}b{u}"
        target = f"{prefix}exit" if v == EXIT else f"{prefix}b{v}"
        back = v != EXIT and u != ENTRY and v in rank and u in rank and rank[v] <= rank[u]
        style = ', style="bold"' if back else ', style="dashed"' if kind == "fallthrough" else ""
        out.append(f'  {source} -> {target} [label="{_escape(kind)}"{style}];\n')
    return "".join(out)


def _title(block: BasicBlock) -> str:
    context = block.context
    if context is not None and context.parent is not None:  # an inlined callee's block
        return f"{context.function.name}/{_title_of(block)}"
    return _title_of(block)


def _title_of(block: BasicBlock) -> str:
    line = block.line
    if block.labels:
        return f"{block.name}:  (line {line})" if line else f"{block.name}:"
    return f"B{block.index}  (line {line})" if line else f"B{block.index}  (new preheader)"


def _statements(block: BasicBlock, events: list[Event], inserted: list[Inserted]) -> list[str]:
    marks = {event.position: f"[{event.kind.value}]" for event in events}  # the kernel's own: no planned fence
    lines = []
    for position, instruction in enumerate(block.instructions):
        for at, site in inserted:
            if at == position:
                lines.append(f"+ {site.text}   <- {site.placement}")
        text = " ".join(instruction.text.split())
        mark = marks.get(position)
        lines.append(f"  {text}  {mark}" if mark else f"  {text}")
    for at, site in inserted:
        if at >= len(block.instructions):
            lines.append(f"+ {site.text}   <- {site.placement}")
    if len(lines) > MAX_LINES:
        keep = [i for i, line in enumerate(lines) if line.startswith("+") or line.endswith("]")]
        head = set(range(MAX_LINES - 3)) | set(range(len(lines) - 2, len(lines))) | set(keep)
        shown: list[str] = []
        skipped = 0
        for i, line in enumerate(lines):
            if i in head:
                if skipped:
                    shown.append(f"  … {skipped} more")
                    skipped = 0
                shown.append(line)
            else:
                skipped += 1
        lines = shown
    return lines


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
