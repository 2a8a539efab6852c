"""``report``: per kernel, the registers, shared memory, stack frame, spills and local
memory ptxas gives it, mapped to the PTX lines and source lines (``.loc``) involved.

What can be mapped, and how:

- Registers, shared memory, the stack frame and the spilled bytes are ptxas's own
  figures (``ptxas -v``, `ptxkit.ptxas.ResourceUsage`).
- Local memory the PTX asks for (``ld.local``/``st.local``) is found in the PTX
  (`ptxkit.rewrite.match`), each with its line and the ``.loc`` in force there.
- Register spills are ptxas's, not the PTX's: no PTX instruction spills. The kernel is
  assembled with ``-lineinfo`` and its SASS read with nvdisasm (`ptxkit.sass`), which
  marks each spill store and refill and gives the PTX line ptxas attributes it to: the
  line of the instruction the spill was scheduled with, which is where the pressure
  shows, not necessarily what causes it. Those lines' ``.loc`` give the source lines.
  Without nvdisasm only the totals are given; without ``.loc`` in the PTX, no source.

>>> import ptxkit
>>> report = resource_report(ptxkit.parse_file("samples/toolchain/vector_add.ptx"))  # doctest: +SKIP
>>> report.kernels[0].name, report.kernels[0].spill_stores  # doctest: +SKIP
('vector_add', 0)
"""

from __future__ import annotations

from ptxkit._records import Record
from ptxkit.rewrite import Plan, match


class Site(Record):
    """A PTX line involved in local-memory traffic: `kind` ``local`` (a PTX
    ``ld.local``/``st.local``), ``spill`` (SASS spill stores and refills ptxas
    attributes to this line) or ``sass-local`` (other SASS local accesses there);
    `text` the PTX there, `source` its ``.loc`` as ``file:line:column`` (None without),
    `stores`/`loads` how many and `store_bytes`/`load_bytes` how much (per thread);
    for a ``local`` site, `sass` counts the SASS local accesses at its line (0: ptxas
    kept the memory in registers; None: no SASS was read)."""

    kind: str
    ptx_line: int | None
    text: str
    source: str | None
    stores: int = 0
    loads: int = 0
    store_bytes: int = 0
    load_bytes: int = 0
    sass: int | None = None


class KernelReport(Record):
    """One function's resources (ptxas's figures, bytes but `registers`) and its
    local-memory `sites`."""

    name: str
    registers: int
    shared_bytes: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    sites: list

    def spills_by_place(self) -> dict:
        """Source line (``file:line``; ``line N`` of the PTX where there is no ``.loc``)
        -> (stores, loads, bytes stored, bytes loaded, PTX lines), most bytes first."""
        places: dict[str, list] = {}
        for site in self.sites:
            if site.kind != "spill":
                continue
            place = site.source.rsplit(":", 1)[0] if site.source and site.source.count(":") >= 2 else \
                site.source or f"line {site.ptx_line}"
            entry = places.setdefault(place, [0, 0, 0, 0, []])
            entry[0] += site.stores
            entry[1] += site.loads
            entry[2] += site.store_bytes
            entry[3] += site.load_bytes
            entry[4].append(site.ptx_line)
        ordered = sorted(places.items(), key=lambda item: -(item[1][2] + item[1][3]))
        return {place: tuple(entry) for place, entry in ordered}

    def to_json(self) -> dict:
        return {**self._asdict(), "sites": [site._asdict() for site in self.sites],
                "spills_by_place": {place: dict(zip(("stores", "loads", "store_bytes", "load_bytes", "ptx_lines"),
                                                    entry)) for place, entry in self.spills_by_place().items()}}


class ResourceReport:
    """The report of one module: `kernels` (`KernelReport`), the `arch` and ptxas
    release it was made with, and `notes` on what could not be mapped."""

    def __init__(self, filename: str, arch: str, ptxas_version: str, kernels: list, notes: list):
        self.filename, self.arch, self.ptxas_version = filename, arch, ptxas_version
        self.kernels, self.notes = kernels, notes

    def to_json(self) -> dict:
        return {"file": self.filename, "arch": self.arch, "ptxas": self.ptxas_version,
                "kernels": [kernel.to_json() for kernel in self.kernels], "notes": self.notes}

    def text(self, limit: int = 10) -> str:
        """The report for people: per kernel its figures, the source lines (else PTX
        lines) with the most spilled bytes (`limit` of them), and the PTX's own local
        memory accesses."""
        out = [f"{self.filename} ({self.arch}, ptxas {self.ptxas_version})"]
        for k in self.kernels:
            out.append(f"{k.name}: {k.registers} registers, {k.shared_bytes} bytes shared memory, {k.stack_frame} "
                       f"bytes stack frame, {k.spill_stores} bytes spill stores, {k.spill_loads} bytes spill loads")
            spills = k.spills_by_place()
            if spills:
                by = "PTX" if all(place.startswith("line ") for place in spills) else "source"
                out.append(f"  spills by {by} line (stores/loads, bytes per thread):")
                for place, (stores, loads, stored, loaded, ptx_lines) in list(spills.items())[:limit]:
                    shown = ", ".join(map(str, ptx_lines[:6])) + (" …" if len(ptx_lines) > 6 else "")
                    out.append(f"    {place}: {stores} stores ({stored} B), {loads} loads ({loaded} B); "
                               f"PTX line{'s' * (len(ptx_lines) > 1)} {shown}")
                if len(spills) > limit:
                    out.append(f"    … {len(spills) - limit} more lines (--format json lists them all)")
            local = [site for site in k.sites if site.kind == "local"]
            if local:
                kept = sum(site.sass == 0 for site in local)
                out.append(f"  local memory in the PTX: {len(local)} ld.local/st.local"
                           + (f", {kept} of them kept in registers by ptxas" if kept else ""))
        out.extend(f"note: {note}" for note in self.notes)
        return "\n".join(out) + "\n"


def resource_report(module, arch: str | None = None, options=()) -> ResourceReport:
    """Assemble `module` (with ``-lineinfo`` and `options`, for `arch`: default its
    ``.target``) and report each function's resources and local-memory sites.

    Raises `ptxkit.ptxas.PtxasError` when ptxas rejects the PTX.
    """
    from ptxkit.isa import parse_target
    from ptxkit.ptxas import assemble

    targets = [t for t in module.targets if parse_target(t)]
    arch = arch or (targets[0] if targets else "sm_90a")
    cubin = assemble(str(module), arch, options=("-lineinfo", *options), filename=module.filename)
    notes, sass = [], {}
    try:
        from ptxkit.sass import disassemble, parse_sass

        sass = parse_sass(disassemble(cubin.data))
    except (FileNotFoundError, RuntimeError, OSError) as err:
        notes.append(f"spills are not mapped to lines: {err}")
    lines = module.source.text.splitlines()
    kernels = []
    for function in module.functions:
        usage = cubin.resources.get(function.name)
        if function.is_declaration or usage is None:
            continue
        listing = sass.get(function.name) if sass else None
        sites = _local_sites(function, listing) + _sass_sites(function, listing or [], lines)
        kernels.append(KernelReport(function.name, usage.registers, usage.shared_bytes, usage.stack_frame,
                                    usage.spill_stores, usage.spill_loads, sites))
        if (usage.spill_stores or usage.spill_loads) and not any(s.kind == "spill" for s in sites) and sass:
            notes.append(f"{function.name}: ptxas reports spills that nvdisasm did not mark")
    if any(k.sites for k in kernels) and not any(s.source for k in kernels for s in k.sites):
        notes.append("the PTX has no .loc lines (compile with -lineinfo or debug info): no source lines")
    return ResourceReport(module.filename, arch, cubin.ptxas_version, kernels, notes)


def _local_sites(function, listing: list | None) -> list[Site]:
    """The PTX's own ``ld.local``/``st.local`` (with the SASS local accesses at their
    lines, when the SASS `listing` was read)."""
    from ptxkit.instruction import head_of
    from ptxkit.isa import access_width
    from ptxkit.rewrite.facts import FunctionFacts

    facts = FunctionFacts(function)
    sites = []
    for instruction in match.find(function, match.space("local") & (match.opcode("ld") | match.opcode("st")), facts):
        store = head_of(instruction)[2] == "st"
        width = access_width(instruction.modifiers)
        loc = facts.locs.loc(instruction)
        sass = None if listing is None else sum(1 for i in listing if i.local_bytes and i.ptx_line == instruction.line)
        sites.append(Site("local", instruction.line, instruction.text, facts.locs.describe(loc) if loc else None,
                          int(store), int(not store), width if store else 0, 0 if store else width, sass))
    return sites


def _sass_sites(function, sass: list, lines: list[str]) -> list[Site]:
    """SASS local stores and loads, spills apart, grouped by the PTX line given them."""
    from ptxkit.rewrite.facts import FunctionFacts

    locs = FunctionFacts(function).locs
    by_line = {node.line: node for node in function.walk() if node.line is not None}
    ptx_local = {site.ptx_line for site in _local_sites(function, None)}
    grouped: dict[tuple, list] = {}
    for instruction in sass:
        if instruction.local_bytes and (instruction.spill or instruction.ptx_line not in ptx_local):
            kind = "spill" if instruction.spill else "sass-local"
            grouped.setdefault((kind, instruction.ptx_line), []).append(instruction)
    sites = []
    for (kind, line), found in sorted(grouped.items(), key=lambda item: (item[0][1] or 0, item[0][0])):
        node = by_line.get(line)
        loc = locs.loc(node) if node is not None and hasattr(node, "opcode") else None
        text = lines[line - 1].strip() if line and line <= len(lines) else ""
        stores = [i for i in found if i.is_store]
        loads = [i for i in found if not i.is_store]
        sites.append(Site(kind, line, text, locs.describe(loc) if loc else None, len(stores), len(loads),
                          sum(i.local_bytes for i in stores), sum(i.local_bytes for i in loads)))
    return sites


def report(module, arch: str | None = None, ptxas_option=()) -> Plan:
    """The pass: changes nothing; its `info` holds the report of the module as the
    pipeline has it at this point (``--pass report`` after instrumentation shows what
    the instrumentation costs in registers and spills)."""
    options = [ptxas_option] if isinstance(ptxas_option, str) else list(ptxas_option)
    plan = Plan(module)
    plan.info.update(resource_report(module, arch, options).to_json())
    return plan
