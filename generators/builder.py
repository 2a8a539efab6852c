"""`PtxBuilder`: registers, instructions and whole kernels as PTX text.

The builder allocates virtual registers per type (``%f`` .f32, ``%h`` .b16, ``%r``
.b32, ``%rd`` .b64, ``%p`` .pred), collects instructions, and renders them with their
``.reg`` declarations, as a function body, a complete ``.entry``, or a list of
ptxkit syntax-tree statements.

>>> b = PtxBuilder("sm_90a")
>>> x, y = b.reg(".f32"), b.reg(".f32")
>>> b.ins("add.f32", x, x, y)
>>> b.declarations(), b.instructions()
(['.reg .f32 %f<2>;'], ['add.f32 %f0, %f0, %f1;'])
>>> print(b.entry("k", [(".u64", "out")]).splitlines()[0])
.visible .entry k(
"""

from __future__ import annotations

import struct

from ptxkit.isa import parse_target

from .dtypes import DType, bits_of, dtype as as_dtype

#: register type → name prefix
PREFIXES = {".f32": "%f", ".b16": "%h", ".b32": "%r", ".b64": "%rd", ".pred": "%p"}

#: PTX ISA version the generated modules declare unless a feature or target needs a newer one.
BASE_VERSION = (8, 0)

#: targets newer than sm_90 and the first PTX ISA version that knows them
TARGET_VERSIONS = {100: (8, 6), 101: (8, 6), 103: (8, 8), 110: (9, 0), 120: (8, 7), 121: (8, 8)}


class PtxBuilder:
    """Collects straight-line PTX for one function, for one target.

    `target` is an ``sm_XY[a|f]`` name; `sm` is its number (features are gated on it).
    `select_for` picks instructions as for an older target while the module still says
    `target`: the fallbacks of an sm_80 can then run, and be checked, on an sm_90.
    `version` starts at ``8.0`` (which the H200's CUDA 13.0 driver can JIT) and rises
    only when a feature needs it (`require_version`).

    >>> PtxBuilder("sm_100a").sm, PtxBuilder("sm_100a").arch_specific
    (100, True)
    """

    def __init__(self, target: str = "sm_90a", select_for: str | None = None):
        parsed = parse_target(target)
        if parsed is None:
            raise ValueError(f"unknown target {target!r}; expected sm_XY, sm_XYa or sm_XYf (e.g. sm_90a)")
        self.target = target
        self.sm, suffix = parsed
        if select_for is not None:  # choose instructions as for an older GPU (to run its fallbacks here)
            older = parse_target(select_for)
            if older is None or older[0] > self.sm:
                raise ValueError(f"select_for must name a target no newer than {target} (got {select_for!r})")
            self.sm = older[0]
        self.arch_specific = suffix == "a"
        self.version = max(BASE_VERSION, TARGET_VERSIONS.get(self.sm, BASE_VERSION))
        self._counts = {kind: 0 for kind in PREFIXES}
        self._lines: list[str] = []
        self._shared: list[str] = []
        self._labels = 0

    # ---- registers --------------------------------------------------------------------
    def reg(self, kind: str) -> str:
        """A fresh register of type `kind` (``.f32``, ``.b16``, ``.b32``, ``.b64``, ``.pred``)."""
        if kind not in PREFIXES:
            raise ValueError(f"unsupported register type {kind!r}; expected one of {sorted(PREFIXES)}")
        count = self._counts[kind]
        self._counts[kind] = count + 1
        return f"{PREFIXES[kind]}{count}"

    def regs(self, kind: str, count: int) -> list[str]:
        """`count` fresh registers of one type."""
        return [self.reg(kind) for _ in range(count)]

    def value_reg(self, t: "str | DType") -> str:
        """A fresh register that holds one element of dtype `t`."""
        return self.reg(as_dtype(t).reg_type)

    def shared(self, name: str, nbytes: int, align: int = 16) -> str:
        """Declare ``.shared .align A .b8 name[nbytes]`` in the function; returns `name`."""
        self._shared.append(f".shared .align {align} .b8 {name}[{nbytes}];")
        return name

    def label(self, stem: str = "L") -> str:
        """A fresh label name (``$L_0``…); place it with `place`."""
        self._labels += 1
        return f"${stem}_{self._labels - 1}"

    # ---- instructions ----------------------------------------------------------------------
    def ins(self, opcode: str, *operands, guard: str | None = None) -> None:
        """Append ``[@guard] opcode op0, op1, …;``."""
        head = f"@{guard} {opcode}" if guard else opcode
        self._lines.append(f"{head} {', '.join(map(str, operands))};" if operands else f"{head};")

    def place(self, label: str) -> None:
        """Put `label` before the next instruction."""
        self._lines.append(f"{label}:")

    def comment(self, text: str) -> None:
        self._lines.append(f"// {text}")

    def require_version(self, version: tuple[int, int]) -> None:
        """Raise the module's ``.version`` to at least `version`."""
        self.version = max(self.version, version)

    def require_sm(self, sm: int, feature: str, arch_specific: bool = False) -> None:
        """Refuse `feature` when the target is older than sm_`sm` (or lacks the ``a`` suffix)."""
        if self.sm < sm or (arch_specific and not self.arch_specific):
            need = f"sm_{sm}{'a' if arch_specific else ''}"
            raise ValueError(f"{feature} needs {need} or newer; the target is {self.target}")

    # ---- constants ----------------------------------------------------------------------------
    def mov_const(self, t: "str | DType", dst: str, value) -> None:
        """``dst = value`` for an element of dtype `t` (f32 as ``0f…``, halves as bit patterns).

        >>> b = PtxBuilder(); b.mov_const("f16", "%h0", -65504.0); b.mov_const("f32", "%f0", 1.0)
        >>> b.instructions()
        ['mov.b16 %h0, 0xFBFF;', 'mov.f32 %f0, 0f3F800000;']
        """
        t = as_dtype(t)
        if t.name == "f32":
            self.ins("mov.f32", dst, f32_literal(value))
        elif t.is_half:
            self.ins("mov.b16", dst, f"0x{bits_of(t, value):04X}")
        else:
            self.ins("mov.b32", dst, str(bits_of(t, value) if t.name == "u32" else int(value)))

    # ---- output --------------------------------------------------------------------------------
    def declarations(self) -> list[str]:
        """``.reg`` lines for every register allocated so far, then the shared variables."""
        regs = [f".reg {kind} {PREFIXES[kind]}<{n}>;" for kind, n in self._counts.items() if n]
        return regs + self._shared

    def instructions(self) -> list[str]:
        """The instructions (and labels, comments) in order."""
        return list(self._lines)

    def body(self, indent: str = "\t") -> str:
        """Declarations then instructions, one per line, indented (labels are not)."""
        lines = [indent + line for line in self.declarations()]
        lines += [line if line.endswith(":") else indent + line for line in self._lines]
        return "\n".join(lines) + "\n"

    def statements(self) -> list:
        """The instructions as detached ptxkit syntax-tree nodes (`ptxkit.parse_statement`).

        >>> b = PtxBuilder(); b.ins("add.f32", "%f0", "%f0", "%f1")
        >>> [s.opcode for s in b.statements()]
        ['add.f32']
        """
        from ptxkit import parse_statement

        return [parse_statement(line) for line in self._lines if not line.startswith("//")]

    def entry(self, name: str, params, directives: str = "") -> str:
        """A complete ``.visible .entry name(params) { body ret; }`` (without module header).

        `params` are (type, name) pairs such as ``(".u64", "src")``; `directives` such as
        ``".maxntid 256, 1, 1"`` go between the parameters and the body.
        """
        header = ",\n".join(f"\t.param {kind} {pname}" for kind, pname in params)
        between = f"{directives}\n" if directives else ""
        return f".visible .entry {name}(\n{header}\n)\n{between}{{\n{self.body()}\tret;\n}}\n"


def module_text(entries: list[str], target: str, version: tuple[int, int] = BASE_VERSION) -> str:
    """A module: ``.version``/``.target``/``.address_size 64`` then the entries.

    >>> print(module_text([], "sm_90a"), end="")
    .version 8.0
    .target sm_90a
    .address_size 64
    """
    head = f".version {version[0]}.{version[1]}\n.target {target}\n.address_size 64\n"
    return head + "".join("\n" + entry for entry in entries)


def f32_literal(value: float) -> str:
    """PTX's exact f32 literal ``0fXXXXXXXX``.

    >>> f32_literal(-3.4028234663852886e38), f32_literal(float("-inf"))
    ('0fFF7FFFFF', '0fFF800000')
    """
    return f"0f{struct.unpack('<I', struct.pack('<f', value))[0]:08X}"
