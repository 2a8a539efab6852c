"""ptxkit.cfg.sync: what each instruction does to shared memory and to barriers, and which
barrier operations can meet.

`events` turns every instruction of a flow graph into the accesses, async-proxy
operations, fences and the arrive/wait sides of hand-offs the proxy analysis follows, each
with the shared-memory `locations` it touches; `phases` (named-barrier and cluster-barrier
phases), `once` (arrives before an mbarrier's one completion) and `armed` (what an
``expect_tx`` arrive need not hand over) say which of those hand-offs cannot happen. It
imports `ptxkit.cfg.flow` and `ptxkit.cfg.values`, never `ptxkit.cfg.fence`
(docs/architecture.md §4).

>>> from ptxkit.cfg.sync.locations import CLUSTER, CTA, SHARED, everywhere, overlaps
>>> overlaps(everywhere(CTA), everywhere(CLUSTER)), str(everywhere(SHARED))
(True, 'shared::cta+shared::cluster')
"""
