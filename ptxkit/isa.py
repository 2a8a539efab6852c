"""Facts about the PTX ISA that the rest of ptxkit relies on, kept in one place.

>>> is_special_register("%tid.x"), is_special_register("%r1")
(True, False)
>>> STATE_SPACES >= {"shared::cta", "global"}
True
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ._regex import compile

#: State-space names as they appear as opcode modifiers (without the dot).
STATE_SPACES = frozenset(
    {
        "global",
        "shared",
        "shared::cta",
        "shared::cluster",
        "local",
        "param",
        "param::entry",
        "param::func",
        "const",
        "tex",
    }
)

#: Linkage directives that may precede a function or variable.
LINKAGES = (".visible", ".extern", ".weak", ".common")

#: Opcodes (before the first dot) that end a basic block.
BLOCK_TERMINATORS = frozenset({"bra", "brx", "ret", "exit", "trap"})

#: A regular expression for the special registers (``%tid.x``, ``%clock64``…).
SPECIAL_REGISTER_PATTERN = (
    r"%(?:tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|is_explicit_cluster"
    r"|clusterid|nclusterid|cluster_ctaid|cluster_nctaid|cluster_ctarank|cluster_nctarank"
    r"|lanemask_(?:eq|le|lt|ge|gt)|clock|clock_hi|clock64|pm[0-7](?:_64)?|envreg\d+"
    r"|globaltimer(?:_lo|_hi)?|reserved_smem_offset_(?:begin|end|cap|\d+)|total_smem_size"
    r"|aggr_smem_size|dynamic_smem_size|current_graph_exec)(?:\.[xyz])?(?![\w$])"
)
_SPECIAL_REGISTER = compile(SPECIAL_REGISTER_PATTERN)  # cached between processes


def is_special_register(name: str) -> bool:
    """True for a PTX special register such as ``%tid.x`` or ``%cluster_ctarank``.

    >>> is_special_register("%clock64")
    True
    """
    return _SPECIAL_REGISTER.fullmatch(name) is not None


def parse_target(target: str) -> tuple[int, str] | None:
    """Split an ``sm_XY[a|f]`` target into (XY, suffix); None for other entries.

    >>> parse_target("sm_90a"), parse_target("sm_100f"), parse_target("debug")
    ((90, 'a'), (100, 'f'), None)
    """
    match = re.fullmatch(r"sm_(\d+)([af]?)", target)
    return (int(match.group(1)), match.group(2)) if match else None


# -- proxies: the generic/async classification used by the fence pass ------------------
#
# The analysis tracks three proxy spaces. The ``shared::cta`` window lies inside the
# ``shared::cluster`` window (PTX ISA §5.1.7), so the two shared spaces overlap.
SHARED_CTA, SHARED_CLUSTER, GLOBAL = "shared::cta", "shared::cluster", "global"
PROXY_SPACES = (SHARED_CTA, SHARED_CLUSTER, GLOBAL)

#: Opcode state-space modifier -> proxy space (``local``, ``param``, ``const`` have none).
SPACE_OF_MODIFIER = {"shared": SHARED_CTA, "shared::cta": SHARED_CTA, "shared::cluster": SHARED_CLUSTER, "global": GLOBAL}


class ProxyEffect(NamedTuple):
    """What one opcode does to the generic/async proxy state.

    kind:
        ``none``; ``write`` (a generic-proxy write of `spaces`); ``address`` (a generic
        write whose space comes from the address: an ``st``/``atom``/``red`` with no
        state space); ``async`` (an async-proxy access of `spaces`); ``fence`` (a proxy
        fence ordering `spaces`); ``cp.async`` (a non-bulk cp.async: a generic write that
        completes later); ``cp.async.wait`` (its completion: the generic write becomes
        visible); ``completion`` (an mbarrier wait, which may complete cp.async writes);
        ``call``.
    unknown:
        True when the opcode is not in the table but looks async (fail closed).

    >>> proxy_effect("fence.proxy.async.shared::cta")
    ProxyEffect(kind='fence', spaces=('shared::cta',), unknown=False)
    """

    kind: str
    spaces: tuple[str, ...] = ()
    unknown: bool = False


_ALL = PROXY_SPACES
_SHARED = (SHARED_CTA, SHARED_CLUSTER)

#: THE classification table (research fence.md §5.1): ``(opcode prefixes, kind, spaces)``.
#: A prefix matches the opcode itself or the opcode followed by more modifiers; the
#: first matching row wins. `spaces` is a tuple, or ``"opcode"`` (the opcode's own
#: state-space modifiers), or ``"address"`` (the opcode's modifier, else the address).
PROXY_TABLE: tuple[tuple[tuple[str, ...], str, object], ...] = (
    # proxy fences; the uni-directional release half orders nothing for the issuer
    (("fence.proxy.async::generic.release", "membar.proxy.async::generic.release"), "none", ()),
    (("fence.proxy.async::generic.acquire", "membar.proxy.async::generic.acquire"), "fence", _SHARED),
    (("fence.proxy.async.global", "membar.proxy.async.global"), "fence", (GLOBAL,)),
    (("fence.proxy.async.shared::cluster", "membar.proxy.async.shared::cluster"), "fence", _SHARED),
    (("fence.proxy.async.shared::cta", "membar.proxy.async.shared::cta",
      "fence.proxy.async.shared", "membar.proxy.async.shared"), "fence", (SHARED_CTA,)),
    (("fence.proxy.async", "membar.proxy.async"), "fence", _ALL),
    # async proxy (§3.2); completion and ordering helpers of the same families do nothing
    (("wgmma.fence", "wgmma.commit_group", "wgmma.wait_group"), "none", ()),
    (("wgmma.mma_async",), "async", (SHARED_CTA,)),
    (("tcgen05.mma", "tcgen05.cp"), "async", (SHARED_CTA,)),  # cta_group::2 adds the cluster window
    (("tcgen05",), "none", ()),  # alloc, dealloc, ld, st, commit, wait, fence, shift
    (("cp.async.bulk.prefetch", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group"), "none", ()),
    (("cp.async.bulk", "cp.reduce.async.bulk"), "async", "opcode"),
    (("multimem.cp.async.bulk", "multimem.cp.reduce.async.bulk"), "async", (SHARED_CTA, GLOBAL)),
    (("clusterlaunchcontrol.try_cancel",), "async", (SHARED_CTA,)),  # ::all adds the cluster window
    # generic proxy writes (§3.3)
    (("cp.async.commit_group", "cp.async.mbarrier.arrive"), "none", ()),
    (("cp.async.wait_group", "cp.async.wait_all"), "cp.async.wait", (SHARED_CTA,)),
    (("cp.async",), "cp.async", (SHARED_CTA,)),
    (("mbarrier.try_wait", "mbarrier.test_wait"), "completion", ()),
    (("st.async", "red.async"), "write", "opcode"),
    (("st.bulk",), "write", (SHARED_CTA,)),
    (("stmatrix",), "write", (SHARED_CTA,)),
    (("st", "atom", "red"), "address", "address"),
    (("multimem.st", "multimem.red"), "write", (GLOBAL,)),
    (("call",), "call", ()),
)

#: Prefixes of opcodes that look async: not in the table -> treated as async (warned).
ASYNC_LOOKING = ("wgmma.", "tcgen05.mma", "cp.async.bulk")

#: Extern functions known not to touch shared memory through either proxy.
BENIGN_EXTERNS = frozenset({"vprintf", "__assertfail", "malloc", "free"})
BENIGN_EXTERN_PREFIXES = ("__nv_",)

_PROXY_ROWS = {prefix: (kind, spaces) for prefixes, kind, spaces in PROXY_TABLE for prefix in prefixes}
_PROXY_CACHE: dict[str, ProxyEffect] = {}


def proxy_effect(opcode: str) -> ProxyEffect:
    """Classify an opcode for the generic/async proxy analysis (one table: `PROXY_TABLE`).

    >>> proxy_effect("st.shared.b16")
    ProxyEffect(kind='write', spaces=('shared::cta',), unknown=False)
    >>> proxy_effect("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes").spaces
    ('shared::cluster', 'global')
    >>> proxy_effect("st.u32").kind, proxy_effect("ld.shared.b32").kind, proxy_effect("wgmma.sp_new.x").unknown
    ('address', 'none', True)
    """
    effect = _PROXY_CACHE.get(opcode)
    if effect is None:
        effect = _PROXY_CACHE[opcode] = _classify(opcode)
    return effect


def _classify(opcode: str) -> ProxyEffect:
    parts = opcode.split(".")
    modifiers = parts[1:]
    for end in range(len(parts), 0, -1):  # longest matching prefix first
        row = _PROXY_ROWS.get(".".join(parts[:end]))
        if row is not None:
            break
    else:
        row = None
    if row is None:
        if ".async" in opcode or opcode.startswith(ASYNC_LOOKING):
            return ProxyEffect("async", _SHARED, True)
        return ProxyEffect("none")
    kind, spaces = row
    if spaces == "opcode" or spaces == "address":
        named = tuple(dict.fromkeys(SPACE_OF_MODIFIER[m] for m in modifiers if m in SPACE_OF_MODIFIER))
        if spaces == "address":
            if named:
                return ProxyEffect("write", named)
            if any(m in STATE_SPACES for m in modifiers):  # local, param, const
                return ProxyEffect("none")
            return ProxyEffect("address")
        if not named:  # an async form whose spaces we cannot read: fail closed
            return ProxyEffect(kind, _ALL, True)
        return ProxyEffect(kind, named)
    if kind == "async" and ("cta_group::2" in modifiers or "multicast::cluster::all" in modifiers):
        spaces = _SHARED
    return ProxyEffect(kind, spaces)


def is_benign_extern(name: str) -> bool:
    """True for extern functions that touch no shared memory (``vprintf``, libdevice).

    >>> is_benign_extern("vprintf"), is_benign_extern("__nv_expf"), is_benign_extern("my_op")
    (True, True, False)
    """
    return name in BENIGN_EXTERNS or name.startswith(BENIGN_EXTERN_PREFIXES)
