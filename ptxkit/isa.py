"""Facts about the PTX ISA that the rest of ptxkit relies on, kept in one place.

>>> is_special_register("%tid.x"), is_special_register("%r1")
(True, False)
>>> STATE_SPACES >= {"shared::cta", "global"}
True
"""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Iterable

from ._records import Record
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

#: The integer types and their widths in bits (PTX ISA §5.2.2, "Fundamental Types"):
#: ``b`` untyped bits, ``s`` signed, ``u`` unsigned.
INTEGER_TYPES = {f"{kind}{bits}": bits for kind in "bsu" for bits in (8, 16, 32, 64)}
#: The floating-point and packed types (PTX ISA §5.2.2, and the packed and narrow types of
#: ``cvt`` and the tensor-core instructions) and their widths in bits.
FLOAT_TYPES = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "f16x2": 32, "bf16x2": 32, "f32x2": 64,
               "e4m3": 8, "e5m2": 8, "e4m3x2": 16, "e5m2x2": 16, "e2m3x2": 16, "e3m2x2": 16, "e2m1x2": 8,
               "ue8m0x2": 16}
#: Every type modifier's width in bits: predicates, integers, ``b128``, floats.
TYPE_WIDTHS = {"pred": 1, **INTEGER_TYPES, "b128": 128, **FLOAT_TYPES}
#: The widths the digits of a type modifier name (``.u32``, ``.f32``: 32).
TYPE_BITS = {"8": 8, "16": 16, "32": 32, "64": 64, "128": 128}

#: ``setp``'s integer comparisons and the order each tests (PTX ISA, setp): eq..ge
#: read the type's sign; lo/ls/hi/hs are the unsigned types' names for lt/le/gt/ge.
COMPARISONS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
               "ge": operator.ge, "lo": operator.lt, "ls": operator.le, "hi": operator.gt, "hs": operator.ge}
#: The unsigned comparisons, by the ordered comparison they make.
UNSIGNED_COMPARISONS = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
#: Each comparison with its operands swapped (``a < b`` is ``b > a``)...
SWAPPED_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "lo": "hi", "hi": "lo",
                       "ls": "hs", "hs": "ls"}
#: ...and negated (``not a < b`` is ``a >= b``).
NEGATED_COMPARISONS = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "lo": "hs", "hs": "lo",
                       "ls": "hi", "hi": "ls"}

#: Opcodes whose first operand is not a register they write (a ``call`` writes only the
#: registers its results name).
NO_DESTINATION = frozenset("bra brx ret exit trap nanosleep stackrestore pmevent st red bar barrier "
                           "fence membar prefetch prefetchu".split())
#: Opcodes whose result depends on their operands alone (no memory, no other thread).
PURE_OPCODES = frozenset({"mov", "and", "or", "xor", "not", "shr", "shl", "add", "sub", "mul", "mad", "div", "rem",
                          "setp", "cvt", "cvta", "bfe", "min", "max", "neg"})
#: Opcodes that may write memory through an address operand.
MEMORY_WRITERS = frozenset(("st", "red", "atom", "cp", "stmatrix", "multimem"))

#: The values some results take whatever the operands: bit counts (``popc``, ``clz``: at
#: most 64), ``bfind``'s bit position or 0xFFFFFFFF when there is none, a lane mask.
RESULT_RANGES = {"popc": (0, 64), "clz": (0, 64), "bfind": (0, 0xFFFFFFFF), "activemask": (0, 0xFFFFFFFF)}

#: Opcodes whose result depends on whether their type reads the top bit as a sign
#: (``add``, ``mul.lo`` and the bitwise ones give the same bits either way; ``mul``/``mad``
#: with ``.hi`` or ``.wide`` depend on it too).
SIGN_READING = frozenset(("shr", "div", "rem", "min", "max", "setp", "slct"))

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


#: The ranges of `%tid.x` and the other special registers (PTX ISA §10).
SPECIAL_RANGES = {
    "%tid.x": (0, 1023), "%tid.y": (0, 1023), "%tid.z": (0, 63), "%ntid.x": (1, 1024), "%ntid.y": (1, 1024),
    "%ntid.z": (1, 64), "%laneid": (0, 31), "%warpid": (0, 63), "%nwarpid": (1, 64), "%cluster_ctarank": (0, 15),
    "%cluster_nctarank": (1, 16), "%cluster_ctaid.x": (0, 15), "%cluster_ctaid.y": (0, 15),
    "%cluster_ctaid.z": (0, 15), "%cluster_nctaid.x": (1, 16), "%cluster_nctaid.y": (1, 16),
    "%cluster_nctaid.z": (1, 16), "%dynamic_smem_size": (0, 232448), "%total_smem_size": (0, 233472),
    "%smid": (0, 1023), "%nsmid": (1, 1024),
    "%ctaid.x": (0, (1 << 31) - 2), "%ctaid.y": (0, 65534), "%ctaid.z": (0, 65534),
    "%nctaid.x": (1, (1 << 31) - 1), "%nctaid.y": (1, 65535), "%nctaid.z": (1, 65535),
}
#: Special registers that keep one value for a thread's whole run (PTX ISA §10; not
#: ``%warpid`` or ``%smid``, which may change when a thread is rescheduled): a branch on a
#: copy of one bounds every later read of it.
FIXED_SPECIALS = frozenset({
    "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%laneid", "%cluster_ctarank",
    "%cluster_nctarank", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z", "%cluster_nctaid.x",
    "%cluster_nctaid.y", "%cluster_nctaid.z", "%dynamic_smem_size", "%total_smem_size",
    "%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z",
})



#: Prefixes of the special registers that name the thread within its CTA...
THREAD_INDEX_SPECIALS = ("%tid.", "%laneid", "%warpid")
#: ...and of those every thread of a CTA reads alike.
CTA_UNIFORM_SPECIALS = ("%ctaid.", "%nctaid.", "%ntid.", "%cluster_", "%clusterid.", "%nclusterid.", "%smid",
                        "%nsmid", "%dynamic_smem_size", "%total_smem_size", "%gridid")


def is_special_register(name: str) -> bool:
    """True for a PTX special register such as ``%tid.x`` or ``%cluster_ctarank``.

    >>> is_special_register("%clock64")
    True
    """
    return _SPECIAL_REGISTER.fullmatch(name) is not None


#: Text that every function needing a proxy fence contains unless it has an async-proxy
#: opcode with ``.async`` in its name: the other async-proxy opcodes (also the
#: fail-closed unknown ones: ``wgmma.``, ``tcgen05.``, ``clusterlaunchcontrol.``) or a
#: call (the opcode, followed by a modifier, a space or a parenthesis: not the
#: ``DW_AT_call_file`` of a debug section).
ASYNC_MARKERS = ("mma_async", "wgmma.", "tcgen05.", "clusterlaunchcontrol.", "call.", "call ", "call\t", "call\n",
                 "call\r", "call(")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.:")


def may_need_fence(text: str) -> bool:
    """False when `text` holds none of `ASYNC_MARKERS` and no word with ``.async`` in it
    that `proxy_effect` takes for an async-proxy access (``cp.async.cg``,
    ``cp.async.wait_group``, ``fence.proxy.async`` and ``st.async`` are not): no function
    in it can need a proxy fence. A plain text search, comments included, so it errs
    only towards analysing.

    >>> may_need_fence("ld.global.f32 %f1, [%rd1];"), may_need_fence("wgmma.fence.sync.aligned;")
    (False, True)
    >>> may_need_fence(".b8 88 // DW_AT_call_file"), may_need_fence("call.uni (retval0), f, (param0);")
    (False, True)
    >>> may_need_fence("cp.async.cg.shared.global [%r1], [%rd1], 16;\\ncp.async.wait_group 0;")
    False
    >>> may_need_fence("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 16, [%r2];")
    True
    """
    if any(marker in text for marker in ASYNC_MARKERS):
        return True
    return any(proxy_effect(word).kind is Effect.ASYNC for word in _words_with_async(text))


def _words_with_async(text: str) -> set[str]:
    """The distinct dotted words (opcodes, in code) of `text` that contain ``.async``."""
    words = set()
    at = text.find(".async")
    while at >= 0:
        start, end = at, at + len(".async")
        while start and text[start - 1] in _WORD:
            start -= 1
        while end < len(text) and text[end] in _WORD:
            end += 1
        words.add(text[start:end])
        at = text.find(".async", end)
    return words


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
# ``shared::cluster`` window (PTX ISA §5.1.7), so the two shared spaces overlap. The
# design behind these tables is in docs/fence.md §2.
SHARED_CTA, SHARED_CLUSTER, GLOBAL = "shared::cta", "shared::cluster", "global"
PROXY_SPACES = (SHARED_CTA, SHARED_CLUSTER, GLOBAL)

#: Opcode state-space modifier -> proxy space (``local``, ``param``, ``const`` have none).
SPACE_OF_MODIFIER = {"shared": SHARED_CTA, "shared::cta": SHARED_CTA, "shared::cluster": SHARED_CLUSTER, "global": GLOBAL}


class Effect(enum.Enum):
    """What one instruction does to memory, as far as the proxy analysis cares.

    >>> Effect.WRITE.value, Effect.ADDRESS_READ.value
    ('write', 'address read')
    """

    NONE = "none"
    WRITE = "write"  # a generic-proxy write of the named spaces (st.shared, stmatrix, st.async …)
    READ = "read"  # a generic-proxy read of the named spaces (ld.shared, ldmatrix)
    ADDRESS_WRITE = "address write"  # st/atom/red with generic addressing: the space comes from the pointer
    ADDRESS_READ = "address read"  # ld with generic addressing
    ASYNC = "async"  # an async-proxy access (wgmma, TMA, bulk copies, tcgen05.mma/cp, try_cancel)
    FENCE = "fence"  # a bidirectional (or acquire) generic<->async proxy fence of the named spaces
    INIT_FENCE = "mbarrier_init fence"  # fence.mbarrier_init: orders this thread's earlier mbarrier.init
    MBARRIER_INIT = "mbarrier.init"  # a generic write of an mbarrier object
    CP_ASYNC = "cp.async"  # a non-bulk cp.async: a generic write that completes later
    CP_ASYNC_WAIT = "cp.async wait"  # cp.async.wait_group / wait_all: cp.async writes complete here
    CALL = "call"


class ProxyEffect(Record):
    """An opcode's `Effect` and the proxy spaces it names.

    unknown:
        True when the opcode is not in the table but looks async (fail closed).

    >>> proxy_effect("fence.proxy.async.shared::cta")
    ProxyEffect(kind=<Effect.FENCE: 'fence'>, spaces=('shared::cta',), unknown=False)
    """

    kind: Effect
    spaces: tuple[str, ...] = ()
    unknown: bool = False


_ALL = PROXY_SPACES
_SHARED = (SHARED_CTA, SHARED_CLUSTER)

#: THE classification table (docs/fence.md §2.1): ``(opcode prefixes, effect, spaces)``.
#: A prefix matches the opcode itself or the opcode followed by more modifiers; the
#: longest matching prefix wins. `spaces` is a tuple, or ``"opcode"`` (the opcode's own
#: state-space modifiers), or ``"address"`` (the opcode's modifier, else the address).
PROXY_TABLE: tuple[tuple[tuple[str, ...], Effect, object], ...] = (
    # proxy fences; the uni-directional release half orders nothing for the issuer (ISA §9.7.13.4)
    (("fence.proxy.async::generic.release", "membar.proxy.async::generic.release"), Effect.NONE, ()),
    (("fence.proxy.async::generic.acquire", "membar.proxy.async::generic.acquire"), Effect.FENCE, _SHARED),
    (("fence.proxy.async.global", "membar.proxy.async.global"), Effect.FENCE, (GLOBAL,)),
    (("fence.proxy.async.shared::cluster", "membar.proxy.async.shared::cluster"), Effect.FENCE, _SHARED),
    (("fence.proxy.async.shared::cta", "membar.proxy.async.shared::cta",
      "fence.proxy.async.shared", "membar.proxy.async.shared"), Effect.FENCE, (SHARED_CTA,)),
    (("fence.proxy.async", "membar.proxy.async"), Effect.FENCE, _ALL),
    (("fence.mbarrier_init",), Effect.INIT_FENCE, (SHARED_CTA,)),
    # async proxy (docs/fence.md §2); completion and ordering helpers of the same families do nothing
    (("wgmma.fence", "wgmma.commit_group", "wgmma.wait_group"), Effect.NONE, ()),
    (("wgmma.mma_async",), Effect.ASYNC, (SHARED_CTA,)),
    (("tcgen05.mma", "tcgen05.cp"), Effect.ASYNC, (SHARED_CTA,)),  # cta_group::2 adds the cluster window
    (("tcgen05",), Effect.NONE, ()),  # alloc, dealloc, ld, st, commit, wait, fence, shift
    (("cp.async.bulk.prefetch", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group"), Effect.NONE, ()),
    (("cp.async.bulk", "cp.reduce.async.bulk"), Effect.ASYNC, "opcode"),
    (("multimem.cp.async.bulk", "multimem.cp.reduce.async.bulk"), Effect.ASYNC, (SHARED_CTA, GLOBAL)),
    (("clusterlaunchcontrol.try_cancel",), Effect.ASYNC, (SHARED_CTA,)),  # ::all adds the cluster window
    # generic proxy (docs/fence.md §2)
    (("cp.async.commit_group", "cp.async.mbarrier.arrive"), Effect.NONE, ()),
    (("cp.async.wait_group", "cp.async.wait_all"), Effect.CP_ASYNC_WAIT, (SHARED_CTA,)),
    (("cp.async",), Effect.CP_ASYNC, (SHARED_CTA,)),
    (("mbarrier.init",), Effect.MBARRIER_INIT, "opcode"),
    # the object's memory may serve another purpose afterwards (PTX ISA, mbarrier.inval)
    (("mbarrier.inval",), Effect.ADDRESS_WRITE, "address"),
    (("st.async", "red.async"), Effect.WRITE, "opcode"),
    (("st.bulk",), Effect.WRITE, (SHARED_CTA,)),
    (("stmatrix",), Effect.WRITE, (SHARED_CTA,)),
    (("ldmatrix",), Effect.READ, (SHARED_CTA,)),
    (("st", "atom", "red"), Effect.ADDRESS_WRITE, "address"),
    (("ld",), Effect.ADDRESS_READ, "address"),
    (("multimem.st", "multimem.red"), Effect.WRITE, (GLOBAL,)),
    (("call",), Effect.CALL, ()),
)

#: Prefixes of opcodes that look async: not in the table -> treated as async (warned).
ASYNC_LOOKING = ("wgmma.", "tcgen05.mma", "cp.async.bulk")

#: Extern functions known not to touch shared memory through either proxy.
BENIGN_EXTERNS = frozenset({"vprintf", "__assertfail", "malloc", "free"})
BENIGN_EXTERN_PREFIXES = ("__nv_",)

_PROXY_ROWS = {prefix: (kind, spaces) for prefixes, kind, spaces in PROXY_TABLE for prefix in prefixes}
_PROXY_CACHE: dict[str, ProxyEffect] = {}
_NAMED_WRITES = {Effect.ADDRESS_WRITE: Effect.WRITE, Effect.ADDRESS_READ: Effect.READ}


def proxy_effect(opcode: str) -> ProxyEffect:
    """Classify an opcode for the generic/async proxy analysis (one table: `PROXY_TABLE`).

    >>> proxy_effect("st.shared.b16").kind, proxy_effect("ld.shared::cluster.b32").spaces
    (<Effect.WRITE: 'write'>, ('shared::cluster',))
    >>> proxy_effect("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes").spaces
    ('shared::cluster', 'global')
    >>> proxy_effect("st.u32").kind.value, proxy_effect("ld.local.b32").kind.value, proxy_effect("wgmma.sp_new.x").unknown
    ('address write', 'none', True)
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
            return ProxyEffect(Effect.ASYNC, _SHARED, True)
        return ProxyEffect(Effect.NONE)
    kind, spaces = row
    if spaces == "opcode" or spaces == "address":
        named = tuple(dict.fromkeys(SPACE_OF_MODIFIER[m] for m in modifiers if m in SPACE_OF_MODIFIER))
        if spaces == "address":
            if named:
                return ProxyEffect(_NAMED_WRITES[kind], named)
            if any(m in STATE_SPACES for m in modifiers):  # local, param, const
                return ProxyEffect(Effect.NONE)
            return ProxyEffect(kind)
        if not named:
            if kind is Effect.MBARRIER_INIT:  # mbarrier.init without a space: a generic address
                return ProxyEffect(kind)
            return ProxyEffect(kind, _ALL, True)  # an async form whose spaces we cannot read: fail closed
        return ProxyEffect(kind, named)
    if kind is Effect.ASYNC and ("cta_group::2" in modifiers or "multicast::cluster::all" in modifiers):
        spaces = _SHARED
    # the table's spaces are "opcode", "address" (both handled above) or a tuple, which mypy cannot narrow by ==
    return ProxyEffect(kind, spaces)  # type: ignore[arg-type]


#: The fewest operands each instruction takes, from its syntax in the PTX ISA ("Instruction
#: Set"), for the opcodes whose operands ptxkit's analyses read; a longer prefix wins
#: (``cp.async.bulk.tensor`` over ``cp.async``). Optional operands are not counted:
#: ``mbarrier.arrive`` takes ``state, [addr]`` and may add a count.
FEWEST_OPERANDS = {
    **dict.fromkeys(("mov", "cvt", "cvta", "neg", "not", "cnot", "abs", "popc", "clz", "brev", "bfind", "ld", "ldu",
                     "st", "red", "ldmatrix", "stmatrix"), 2),
    **dict.fromkeys(("add", "sub", "mul", "mul24", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
                     "mapa", "setp", "set", "atom", "st.async", "red.async"), 3),
    **dict.fromkeys(("mad", "mad24", "selp", "slct", "bfe", "prmt", "shf", "shfl"), 4),
    "bfi": 5, "shfl.sync": 5,
    "wgmma.mma_async": 4, "tcgen05.mma": 4, "tcgen05.commit": 1, "tcgen05.shift": 1,
    **dict.fromkeys(("tcgen05.cp", "tcgen05.ld", "tcgen05.st", "tcgen05.alloc", "tcgen05.dealloc"), 2),
    "cp.async": 3, "cp.async.bulk": 3, "cp.reduce.async.bulk": 3, "cp.async.bulk.tensor": 2,
    "cp.reduce.async.bulk.tensor": 2, "cp.async.bulk.prefetch": 2, "cp.async.bulk.prefetch.tensor": 1,
    "cp.async.mbarrier.arrive": 1, "cp.async.wait_group": 1, "cp.async.bulk.wait_group": 1,
    "cp.async.commit_group": 0, "cp.async.wait_all": 0, "cp.async.bulk.commit_group": 0,
    **dict.fromkeys(("mbarrier.init", "mbarrier.arrive", "mbarrier.arrive_drop", "mbarrier.expect_tx",
                     "mbarrier.complete_tx", "mbarrier.pending_count"), 2),
    "mbarrier.test_wait": 3, "mbarrier.try_wait": 3, "mbarrier.inval": 1,
    **{f"{name}.{op}": count for name in ("bar", "bar.cta", "barrier", "barrier.cta")
       for op, count in (("sync", 1), ("arrive", 2), ("red", 3))},
    "bar.warp.sync": 1,
}
_FEWEST_CACHE: dict[str, int] = {}


def fewest_operands(opcode: str) -> int:
    """The fewest operands `opcode` takes (`FEWEST_OPERANDS`; 0 for opcodes not listed).

    >>> [fewest_operands(opcode) for opcode in ("add.s32", "cp.async.bulk.tensor.2d.shared::cluster.global",
    ...                                         "cp.async.ca.shared.global", "barrier.cluster.arrive")]
    [3, 2, 3, 0]
    """
    found = _FEWEST_CACHE.get(opcode)
    if found is None:
        parts = opcode.split(".")
        found = next((FEWEST_OPERANDS[key] for end in range(len(parts), 0, -1)
                      if (key := ".".join(parts[:end])) in FEWEST_OPERANDS), 0)
        _FEWEST_CACHE[opcode] = found
    return found


def is_benign_extern(name: str) -> bool:
    """True for extern functions that touch no shared memory (``vprintf``, libdevice).

    >>> is_benign_extern("vprintf"), is_benign_extern("__nv_expf"), is_benign_extern("my_op")
    (True, True, False)
    """
    return name in BENIGN_EXTERNS or name.startswith(BENIGN_EXTERN_PREFIXES)


_ELEMENT_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}


def access_width(modifiers: Iterable[str]) -> int:
    """Bytes one thread's load or store covers: the element type times the vector length.

    >>> access_width(("shared", "v4", "b32")), access_width(("local", "u64")), access_width(("f16x2",))
    (16, 8, 4)
    """
    count = 1
    element = 4
    for modifier in modifiers:
        if modifier[:1] == "v" and modifier[1:].isdigit():
            count = int(modifier[1:])
        elif modifier[:1] in "bsuf" and modifier[1:] in _ELEMENT_BYTES:
            element = _ELEMENT_BYTES[modifier[1:]]
    return element * count


# -- synchronisation: where one thread's pending accesses reach another ------------------


class Sync(enum.Enum):
    """How an instruction takes part in a hand-off between threads (docs/fence.md §4).

    >>> sync_effect("bar.sync").kind, sync_effect("mbarrier.try_wait.parity.shared::cta.b64").kind
    (<Sync.ARRIVE_WAIT: 'arrive+wait'>, <Sync.WAIT: 'wait'>)
    """

    ARRIVE = "arrive"
    WAIT = "wait"
    ARRIVE_WAIT = "arrive+wait"


class SyncObject(enum.Enum):
    """What a thread arrives on or waits for.

    >>> SyncObject.NAMED_BARRIER.value
    'named barrier'
    """

    NAMED_BARRIER = "named barrier"  # bar/barrier with an id (an id in a register may be any)
    MBARRIER = "mbarrier"  # an mbarrier object, by its shared-memory location
    CLUSTER_BARRIER = "cluster barrier"  # barrier.cluster: every thread of every CTA of the cluster
    WARP = "warp"  # bar.warp.sync (__syncwarp)


class SyncEffect(Record):
    """An opcode's part in a hand-off: `kind` and `object`; `operand` is the index of
    the operand naming the object (the barrier id or the mbarrier address), or None.

    >>> sync_effect("mbarrier.arrive.expect_tx.shared::cta.b64")
    SyncEffect(kind=<Sync.ARRIVE: 'arrive'>, object=<SyncObject.MBARRIER: 'mbarrier'>, operand=-1)
    """

    kind: Sync
    object: SyncObject
    operand: int | None


#: ``(opcode prefixes, kind, object, operand index)``; the longest prefix wins.
SYNC_TABLE: tuple[tuple[tuple[str, ...], Sync, SyncObject, int | None], ...] = (
    (("bar.sync", "bar.red", "bar.cta.sync", "bar.cta.red", "barrier.sync", "barrier.red", "barrier.cta.sync",
      "barrier.cta.red"), Sync.ARRIVE_WAIT, SyncObject.NAMED_BARRIER, 0),
    (("bar.arrive", "bar.cta.arrive", "barrier.arrive", "barrier.cta.arrive"), Sync.ARRIVE, SyncObject.NAMED_BARRIER, 0),
    (("bar.warp.sync",), Sync.ARRIVE_WAIT, SyncObject.WARP, None),
    (("barrier.cluster.arrive",), Sync.ARRIVE, SyncObject.CLUSTER_BARRIER, None),
    (("barrier.cluster.wait",), Sync.WAIT, SyncObject.CLUSTER_BARRIER, None),
    # mbarrier.arrive* and complete_tx: `state, [addr]` or `[addr]` (the sink form writes `_`)
    (("mbarrier.arrive", "mbarrier.arrive_drop", "mbarrier.complete_tx"), Sync.ARRIVE, SyncObject.MBARRIER, -1),
    (("cp.async.mbarrier.arrive",), Sync.ARRIVE, SyncObject.MBARRIER, -1),
    (("tcgen05.commit",), Sync.ARRIVE, SyncObject.MBARRIER, -1),
    (("mbarrier.try_wait", "mbarrier.test_wait"), Sync.WAIT, SyncObject.MBARRIER, -1),
)
_SYNC_ROWS = {prefix: (kind, obj, operand) for prefixes, kind, obj, operand in SYNC_TABLE for prefix in prefixes}
_SYNC_CACHE: dict[str, SyncEffect | None] = {}


def sync_effect(opcode: str) -> SyncEffect | None:
    """The opcode's part in a thread hand-off, or None (one table: `SYNC_TABLE`).

    An operand index of -1 means "the memory operand" (mbarrier forms put a state
    register, ``_`` or a predicate before it, or nothing).

    >>> sync_effect("barrier.sync.aligned").object, sync_effect("barrier.cluster.arrive.relaxed.aligned").kind
    (<SyncObject.NAMED_BARRIER: 'named barrier'>, <Sync.ARRIVE: 'arrive'>)
    >>> sync_effect("mbarrier.init.shared::cta.b64") is None, sync_effect("bar.warp.sync").object.value
    (True, 'warp')
    """
    if opcode in _SYNC_CACHE:
        return _SYNC_CACHE[opcode]
    parts = opcode.split(".")
    found = None
    for end in range(len(parts), 0, -1):
        row = _SYNC_ROWS.get(".".join(parts[:end]))
        if row is not None:
            found = SyncEffect(*row)
            break
    _SYNC_CACHE[opcode] = found
    return found


# -- async operands: where an async op's shared-memory footprint comes from --------------


class AsyncForm(enum.Enum):
    """How an async op names the shared memory it reads or writes (docs/fence.md §3.3).

    >>> async_form("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes")
    <AsyncForm.TENSOR_LOAD: 'tensor load'>
    >>> async_form("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group").value
    'tensor store'
    """

    WGMMA = "wgmma"  # d, a (descriptor or registers), b descriptor: reads A (if a descriptor) and B
    TCGEN05_MMA = "tcgen05.mma"  # [d], a descriptor or [tmem], b descriptor: reads A (if a descriptor), B
    TCGEN05_CP = "tcgen05.cp"  # [taddr], s-desc: reads the source descriptor's matrix
    TENSOR_LOAD = "tensor load"  # [dst], [tmap, coords], [mbar]: writes dst (the box: bounded by expect_tx)
    TENSOR_STORE = "tensor store"  # [tmap, coords], [src]: reads src (the box: up to the end of its buffer)
    BULK_COPY = "bulk copy"  # [dst], [src], size {, [mbar]}: writes dst / reads src of `size` bytes
    TRY_CANCEL = "try_cancel"  # [addr], [mbar]: writes 16 bytes at addr
    UNKNOWN = "unknown"  # fail closed: every shared byte, read and written


_FORM_PREFIXES = (
    ("wgmma.mma_async", AsyncForm.WGMMA), ("tcgen05.mma", AsyncForm.TCGEN05_MMA), ("tcgen05.cp", AsyncForm.TCGEN05_CP),
    ("cp.async.bulk.tensor", None), ("cp.reduce.async.bulk.tensor", None),
    ("cp.async.bulk", AsyncForm.BULK_COPY), ("cp.reduce.async.bulk", AsyncForm.BULK_COPY),
    ("multimem.cp.async.bulk", AsyncForm.BULK_COPY), ("multimem.cp.reduce.async.bulk", AsyncForm.BULK_COPY),
    ("clusterlaunchcontrol.try_cancel", AsyncForm.TRY_CANCEL),
)


def async_form(opcode: str) -> AsyncForm:
    """How an async-proxy opcode's operands name shared memory (see `AsyncForm`).

    >>> async_form("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16").value, async_form("wgmma.new_op").value
    ('wgmma', 'unknown')
    """
    form = _FORM_CACHE.get(opcode)
    if form is None:
        form = _FORM_CACHE[opcode] = _async_form(opcode)
    return form


_FORM_CACHE: dict[str, AsyncForm] = {}


def _async_form(opcode: str) -> AsyncForm:
    for prefix, form in _FORM_PREFIXES:
        if opcode == prefix or opcode.startswith(prefix + "."):
            if form is None:  # a tensor copy: the first state space says which side is shared memory
                spaces = [m for m in opcode.split(".") if m in SPACE_OF_MODIFIER]
                return AsyncForm.TENSOR_LOAD if spaces and spaces[0] != GLOBAL else AsyncForm.TENSOR_STORE
            return form
    return AsyncForm.UNKNOWN
