"""What the instrumentation passes share: which kernels they instrument, where each
kernel's buffer comes from, and how an instruction's source line is named.

>>> import ptxkit
>>> from ptxkit.rewrite import Plan
>>> plan = Plan(ptxkit.parse_file("samples/toolchain/vector_add.ptx"))
>>> [k.name for k in kernels(plan, None)], buffer_of(plan, plan.function("vector_add"), "param")
(['vector_add'], ('param', 'ptxkit_trace'))
"""

from __future__ import annotations


def kernels(plan, names) -> list:
    """The `FunctionPlan`s of the kernels named by `names` (a name, a list, or None for
    every ``.entry``); ValueError for a name that is no kernel of the module."""
    every = plan.kernels()
    if names is None:
        return every
    wanted = [names] if isinstance(names, str) else list(names)
    known = {k.name: k for k in every}
    missing = [name for name in wanted if name not in known]
    if missing:
        raise ValueError(f"no kernel {', '.join(missing)} in the module (kernels: {', '.join(known) or 'none'})")
    return [known[name] for name in wanted]


def buffer_of(plan, k, buffer: str) -> tuple:
    """Where kernel `k` finds its buffer, as a layout's ``buffer`` entry: ``param``
    adds a ``.u64`` parameter at the end of its list; ``global`` declares a
    ``.visible .global .u64`` module variable for it; ``param:NAME`` uses its existing
    ``.u64`` parameter NAME, and ``last`` its last one (Triton's profile scratch)."""
    kind, _, name = buffer.partition(":")
    params = k.function.signature.params
    if kind == "last" and not name:
        if not params:
            raise ValueError(f"kernel {k.name} has no parameter to record into")
        kind, name = "param", params[-1].name
    if kind == "param" and name:
        found = {p.name: p for p in params}.get(name)
        if found is None:
            raise ValueError(f"kernel {k.name} has no parameter {name!r}")
        if found.type not in (".u64", ".b64", ".s64") or found.array:
            raise ValueError(f"kernel {k.name}'s parameter {name!r} is no 64-bit address ({found.type})")
        return ("param", name)
    if kind == "param":
        return ("param", k.add_param(".u64", "trace", pointer="global", align=16).name)
    if kind == "global" and not name:
        return ("global", plan.declare_global(".u64", f"trace_{k.name}", align=8, linkage="visible"))
    raise ValueError(f"buffer must be param, global, last or param:NAME, not {buffer!r}")


def source_of(k, instruction) -> str | None:
    """``file:line`` of the ``.loc`` in force at `instruction` (None without one)."""
    loc = k.facts.locs.loc(instruction)
    if loc is None:
        return None
    return f"{k.facts.locs.files.get(loc.file, loc.file)}:{loc.line}"
