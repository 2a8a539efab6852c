"""The SASS of a cubin, each instruction with the PTX line it came from (nvdisasm).

Assembled with ``ptxas -lineinfo``, a cubin carries a table from its SASS to the lines
of the PTX ptxas read; ``nvdisasm -gp`` prints it (``//## File ".nv_debug_ptx_txt",
line N``) and marks the local-memory stores and loads ptxas itself made to spill
registers (``(*"SpillRefill"*)``). nvdisasm is looked up as ptxas is
(``$NVDISASM``, the CUDA toolkit, ``PATH``, the ``nvidia-cuda-nvdisasm`` wheel).

>>> listing = '''//--------------------- .text.k --------------------------
... \t//## File ".nv_debug_ptx_txt", line 41
...         /*0090*/                   STL.64 [R1+0x88], R26                       (*"SpillRefill"*);
...         /*00a0*/                   LDL R3, [R4] ;
... '''
>>> store, load = parse_sass(listing)["k"]
>>> (store.opcode, store.ptx_line, store.spill, store.local_bytes), (load.opcode, load.spill, load.local_bytes)
(('STL.64', 41, True, 8), ('LDL', False, 4))
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from ._records import Record

_HOW_TO_GET = ("install the CUDA toolkit, or `pip install \"ptxkit[toolkit]\"` (the nvidia-cuda-nvdisasm wheel), "
               "or set $NVDISASM to an nvdisasm binary")
_SECTION = re.compile(r"//-+ \.text\.(\S+)\s+-+")
_LINE = re.compile(r'//## File "[^"]*", line (\d+)')
_INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*)")
_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


class SassInstruction(Record):
    """One SASS instruction of `function`: its byte `offset`, `opcode` with modifiers
    (``STL.64``), the `ptx_line` ptxas attributes it to (None without line info) and
    whether it is one of ptxas's own register spills or refills (`spill`)."""

    function: str
    offset: int
    opcode: str
    ptx_line: int | None
    spill: bool

    @property
    def local_bytes(self) -> int:
        """Bytes a local-memory store or load (``STL``/``LDL``) moves; 0 for others.

        >>> SassInstruction("k", 0, "LDL.LU.128", None, True).local_bytes
        16
        """
        base, *modifiers = self.opcode.split(".")
        if base not in ("STL", "LDL"):
            return 0
        return next((_WIDTHS[m] for m in modifiers if m in _WIDTHS), 4)

    @property
    def is_store(self) -> bool:
        return self.opcode.startswith("STL")


def find_nvdisasm() -> str:
    """The path of nvdisasm; FileNotFoundError saying where ptxkit looked and how to get it.

    >>> find_nvdisasm()  # doctest: +SKIP
    '/usr/local/cuda/bin/nvdisasm'
    """
    from .toolkit import find_tool

    return find_tool("nvdisasm", _HOW_TO_GET)


def disassemble(cubin: bytes, timeout: float = 120.0) -> str:
    """``nvdisasm -gp -c`` of `cubin`: its SASS with the PTX line of each instruction.

    >>> import ptxkit
    >>> text = open("samples/toolchain/vector_add.ptx").read()
    >>> cubin = ptxkit.assemble(text, options=("-lineinfo",))  # doctest: +SKIP
    >>> "//## File" in disassemble(cubin.data)  # doctest: +SKIP
    True
    """
    tool = find_nvdisasm()
    with tempfile.TemporaryDirectory(prefix="ptxkit-nvdisasm-") as folder:
        path = Path(folder, "input.cubin")
        path.write_bytes(cubin)
        done = subprocess.run([tool, "-gp", "-c", str(path)], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
        raise RuntimeError(f"nvdisasm failed: {detail}")
    return done.stdout.decode("utf-8", "replace")


def parse_sass(listing: str) -> dict[str, list[SassInstruction]]:
    """Function name -> its SASS instructions, from an ``nvdisasm -gp`` listing."""
    functions: dict[str, list[SassInstruction]] = {}
    name = line = None
    for text in listing.splitlines():
        section = _SECTION.match(text)
        if section:
            name, line = section.group(1), None
            functions.setdefault(name, [])
            continue
        if name is None:
            continue
        where = _LINE.search(text)
        if where:
            line = int(where.group(1))
            continue
        instruction = _INSTRUCTION.match(text)
        if instruction:
            functions[name].append(SassInstruction(name, int(instruction.group(1), 16), instruction.group(2), line,
                                                   '"SpillRefill"' in text))
    return functions
