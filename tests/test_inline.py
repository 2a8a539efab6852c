"""ptxkit.cfg.flow.inline: callee bodies cloned into the kernel's graph."""

from __future__ import annotations

import ptxkit
from ptxkit.cfg.flow.graph import EXIT
from ptxkit.cfg.flow.inline import Context, call_target, inlined_graph

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def module(funcs: str, body: str):
    return ptxkit.parse(f"{HEAD}{funcs}.visible .entry k()\n{{\n{body}\tret;\n}}\n")


def test_each_call_gets_its_own_copy_and_returns_to_its_site():
    funcs = ".func g()\n{\n\tbar.sync 2;\n\tret;\n}\n.func f()\n{\n\tcall.uni g, ();\n\tret;\n}\n"
    flow = inlined_graph(module(funcs, "\tcall.uni f, ();\n\tcall.uni g, ();\n").function("k"))
    names = [(b.context.function.name, b.context.depth) for b in flow.blocks]
    assert names.count(("g", 2)) == 1 and names.count(("g", 1)) == 1 and ("f", 1) in names
    contexts = {b.context.id for b in flow.blocks}
    assert len(contexts) == 4  # k, f, g inside f, and the second g
    ret = [b.index for b in flow.blocks if b.instructions and b.instructions[-1].text == "ret;"
           and b.context.parent is None]
    assert flow.exits == ret


def test_recursion_and_extern_calls_stay_calls():
    funcs = ".extern .func e()\n;\n.func r()\n{\n\tcall.uni r, ();\n\tret;\n}\n"
    flow = inlined_graph(module(funcs, "\tcall.uni r, ();\n\tcall.uni e, ();\n").function("k"))
    inner = [b for b in flow.blocks if b.context.function.name == "r"]
    assert len(inner) == 1 and inner[0].instructions[0].text == "call.uni r, ();"  # not expanded again
    assert all("call" not in kind for (u, v), kind in flow.kinds.items()
               if u != "entry" and flow.blocks[u].context.depth == 1)


def test_exit_inside_a_callee_ends_the_kernel():
    funcs = ".func f()\n{\n.reg .pred %p<2>;\n\t@%p1 exit;\n\tret;\n}\n"
    flow = inlined_graph(module(funcs, "\tcall.uni f, ();\n\tbar.sync 0;\n").function("k"))
    exiting = [u for (u, v), kind in flow.kinds.items() if v == EXIT and kind == "exit"]
    assert len(exiting) == 1 and flow.blocks[exiting[0]].context.function.name == "f"


def test_call_targets_and_contexts():
    call = ptxkit.parse_statement("call.uni (retval0, retval1), f, (param0);")
    assert call_target(call) == ("f", ["param0"], ["retval0", "retval1"])
    assert call_target(ptxkit.parse_statement("call (retval0), %rd4, (param0), proto;"))[0] is None
    root = Context(0, None)
    child = Context(1, None, root)
    assert child.within(root) and not root.within(child) and child.prefix == "1:"
