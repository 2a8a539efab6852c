"""Where a kernel's variables live (`ptxkit.cfg.values.symbols`)."""

from __future__ import annotations

import ptxkit
from ptxkit.cfg.values.symbols import symbol_regions, templates

HEAD = (".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 1024 .b8 dyn[];\n")


def test_symbol_regions():
    module = ptxkit.parse(f"{HEAD}.visible .entry k()\n{{\n.shared .align 8 .b64 bars[4];\n"
                          f".local .align 8 .b8 __local_depot0[64];\n.reg .b32 plain;\n\tret;\n}}\n")
    regions = symbol_regions(module.function("k"))
    assert regions["bars"][0].region.size == 32 and regions["bars"][0].region.align == 8
    assert regions["dyn"][0].region.size is None and regions["dyn"][0].region.align == 1024
    assert regions["__local_depot0"][0].space == "local" and regions["plain"] is None


def test_a_template_is_no_template_once_an_instruction_reads_it():
    text = (f"{HEAD}.global .align 8 .b8 desc$1[8];\n.global .align 8 .b8 desc$2[8];\n"
            ".visible .entry k()\n{\n.reg .b64 %rd<3>;\n\tmov.u64 %rd1, desc$1;\n"
            "\tld.global.u64 %rd2, [desc$2];\n\tret;\n}\n")
    assert templates(ptxkit.parse(text)) == frozenset({"desc$1"})
