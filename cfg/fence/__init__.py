"""ptxkit.cfg.fence: the proxy-fence pass itself, on top of the other subpackages.

The generic/async proxy fixpoint (`proxy`), where the fences go (`placement`), the pass's
sites, edits and report, the library API (`fence`), what the pass can be asked and which
targets it runs on (`options`, all the command line loads for PTX with no async-proxy
operation), and Graphviz drawings of a graph with its proxy state (`dot`)
(docs/architecture.md §4). This ``__init__`` imports nothing, so loading `options` does not
load the analysis; the pass's public names are `ptxkit.cfg`'s.

>>> from ptxkit.cfg.fence.options import PLACEMENTS, FENCE_SIDES
>>> PLACEMENTS, FENCE_SIDES
(('hoist', 'inline'), ('issuer', 'writer'))
"""
