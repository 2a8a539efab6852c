"""ptxkit.cfg.values: what registers hold, as far as the fence pass needs to know.

The lattice of abstract values, integer intervals and addresses into memory regions
(`values`), and the demand-driven analysis that computes them at chosen instructions
(`registers`), with its parts: what integer instructions compute (`arithmetic`), the
remainder and rounding idioms (`idioms`) and values that move together (`counters`), what
branches say (`conditions`), ``-G`` stack frames (`frames`), where variables live
(`symbols`), special registers (`specials`) and which registers may hold a generic
shared-memory address (`escape`); and, from the thread index, where the threads of a CTA
split (`divergence`) and which of them may run each block (`thread_sets`). It imports only
`ptxkit.cfg.flow` of the rest of `ptxkit.cfg` (docs/architecture.md §4).

>>> from ptxkit.cfg.values.values import number, show
>>> from ptxkit.cfg.values.arithmetic import BINARY
>>> show(BINARY["div"](number(0, 100), number(4), 32))
'[0, 25]'
"""
