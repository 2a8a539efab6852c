"""The one place the rewrite API asks ptxkit's value analysis something.

Most matcher facts are syntactic (opcodes, state spaces, the CFG). One is not: whether
a *generic* ``ld``/``st``/``atom``/``red`` (no state space in its opcode) may reach
shared memory depends on where its address came from (a ``cvta.shared``, a pointer
loaded back from memory that may hold one…). That answer comes from the fence pass's
classification of the function's accesses (`ptxkit.cfg.sync.events`), asked here and
nowhere else, so that the analysis core can be replaced behind this one function.

>>> import ptxkit
>>> m = ptxkit.parse_file("samples/fence/x13_generic_store_through_cvta_shared.ptx")
>>> [node.text for node in generic_shared_accesses(m.function("k"))]
['st.u32 \\t[%rd7], %r0;']
"""

from __future__ import annotations


def generic_shared_accesses(function) -> list:
    """The generic-addressed loads, stores and atomics of `function` that may access
    shared memory (either window), in source order. Calls are not looked into.

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/x14_generic_store_unknown_pointer.ptx")
    >>> generic_shared_accesses(m.function("k"))  # a pointer no shared address reaches
    []
    """
    from ptxkit.cfg.flow.graph import flow_graph
    from ptxkit.cfg.sync.events import EventOptions, Kind, classify
    from ptxkit.cfg.sync.locations import SHARED

    flow = flow_graph(function)
    events = classify(flow, EventOptions(tracked=SHARED))
    found = []
    for block, block_events in zip(flow.blocks, events.by_block):
        for event in block_events:
            if event.kind not in (Kind.READ, Kind.WRITE) or not any(loc.space & SHARED for loc in event.locations):
                continue
            instruction = block.instructions[event.position]
            if instruction.view.state_space is None:
                found.append(instruction)
    return found
