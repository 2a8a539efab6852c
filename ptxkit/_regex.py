"""Regular expressions compiled once per installation, not once per process.

Python compiles a regular expression in Python code (``re._parser`` and ``re._compiler``)
before the C engine sees it: the large patterns of the PTX front end take milliseconds
each, in every process that imports them, which is most of what ``ptxkit fence --check``
or the ptxas wrapper pay before any work. `compile` keeps what the Python half produces
(the engine's code, the flags and the group names) in a file beside ptxkit's bytecode,
``ptxkit/__pycache__/regex.<cache tag>-<engine magic>.marshal``, and builds the pattern
from it with the engine's own constructor, as ``re`` does itself.

>>> pattern = compile(r"(?P<op>[a-z]+)\\.(?P<type>[suf]\\d+)")
>>> pattern.match("add.s32").group("op", "type")
('add', 's32')

The file follows the rules of bytecode: written only when ``sys.dont_write_bytecode`` is
false (``PYTHONDONTWRITEBYTECODE``), under ``sys.pycache_prefix`` when that is set,
replaced atomically, keyed by the interpreter's cache tag, its version and the engine's
magic number (another Python never reads it), and ignored when it cannot be read or does
not hold valid code: the pattern is then compiled the ordinary way.

CPython 3.11.0 to 3.11.4 mis-match a possessive repetition of a group when one try of the
group consumes text and then fails: the text stays consumed (python/cpython#106052,
fixed in 3.11.5), so ``(?:ab?c)*+`` matches ``'a'`` and the PTX lexer reads a comment
after a directive as part of it. There, `compile` hands the engine the equivalent that
CPython 3.11.5 itself first shipped as its fix: a greedy repetition inside an atomic
group, ``(?>(?:ab?c)*)``. Later versions get the possessive code as written, which scans
PTX faster.
"""

from __future__ import annotations

import os
import re
import sys

try:  # the two halves of re.compile (Python 3.11 and later)
    import _sre
    from re import _compiler, _parser
except ImportError:  # pragma: no cover - another implementation: compile as re does
    _sre = None

#: Whether the engine matches a possessive repetition of a group correctly (see above).
POSSESSIVE_GROUPS_WORK = sys.implementation.name != "cpython" or sys.version_info >= (3, 11, 5)

#: (pattern, flags) -> arguments of _sre.compile after the pattern, as marshal stores them
_Entry = tuple
_entries: dict[tuple[str, int], _Entry] | None = None
_used: set[tuple[str, int]] = set()
_unsaved = False


def compile(pattern: str, flags: int = 0) -> re.Pattern:
    """``re.compile(pattern, flags)``, from the cache when it holds the pattern.

    >>> compile(r"\\d+", re.ASCII).findall("r12, r3") == re.compile(r"\\d+", re.ASCII).findall("r12, r3")
    True
    """
    if _sre is None or not isinstance(pattern, str):
        return re.compile(pattern, flags)
    entries = _load() if _entries is None else _entries
    key = (pattern, int(flags))
    _used.add(key)
    entry = entries.get(key)
    if entry is not None:
        try:
            return _sre.compile(pattern, *entry)
        except Exception:  # damaged or foreign code: the engine refused it
            pass
    entry = _translate(pattern, int(flags))
    entries[key] = entry
    _schedule_save()
    return _sre.compile(pattern, *entry)


def cache_path() -> str | None:
    """The cache file of this interpreter, or None when it has no bytecode cache tag.

    >>> cache_path().endswith(".marshal")  # doctest: +SKIP
    True
    """
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    package = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.join(package, "__pycache__")
    if sys.pycache_prefix:
        folder = os.path.join(sys.pycache_prefix, package.lstrip(os.sep))
    version = "{}.{}.{}".format(*sys.version_info)
    return os.path.join(folder, f"regex.{tag}-{version}-{_sre.MAGIC}.marshal")


def _translate(pattern: str, flags: int, possessive_groups: bool = POSSESSIVE_GROUPS_WORK) -> _Entry:
    """What ``re._compiler.compile`` hands to the engine, in types marshal can store
    (without possessive repetitions of groups unless `possessive_groups`)."""
    parsed = _parser.parse(pattern, flags)
    if not possessive_groups:
        atomic_for_possessive(parsed)
    code = [int(word) for word in _compiler._code(parsed, flags)]
    names = dict(parsed.state.groupdict)
    by_index = [None] * parsed.state.groups
    for name, index in names.items():
        by_index[index] = name
    return (int(flags | parsed.state.flags), code, parsed.state.groups - 1, names, tuple(by_index))


def atomic_for_possessive(tree) -> None:
    """Rewrite each possessive repetition of a group in a parsed pattern (``re._parser``)
    as a greedy one inside an atomic group, which matches the same text; repetitions of
    one character, which the engine runs by counting, stay as they are.

    >>> from re import _parser
    >>> tree = _parser.parse(r"(?:ab?c)*+x++")
    >>> atomic_for_possessive(tree)
    >>> [str(op) for op, _ in tree]
    ['ATOMIC_GROUP', 'POSSESSIVE_REPEAT']
    """
    for index, (op, argument) in enumerate(tree.data):
        for child in _subpatterns(argument):
            atomic_for_possessive(child)
        if op is _parser.POSSESSIVE_REPEAT and not _compiler._simple(argument[2]):
            greedy = _parser.SubPattern(tree.state, [(_parser.MAX_REPEAT, argument)])
            tree.data[index] = (_parser.ATOMIC_GROUP, greedy)


def _subpatterns(argument):
    """The parsed sub-patterns inside one node's argument (nested in tuples and lists)."""
    if isinstance(argument, _parser.SubPattern):
        yield argument
    elif isinstance(argument, (tuple, list)):
        for item in argument:
            yield from _subpatterns(item)


def _load() -> dict:
    """Read the cache file (an empty cache when it is missing, unreadable or malformed)."""
    global _entries
    import marshal

    _entries = {}
    path = cache_path()
    if path is None:
        return _entries
    try:
        with open(path, "rb") as handle:
            loaded = marshal.loads(handle.read())
    except (OSError, EOFError, ValueError, TypeError):
        return _entries
    if isinstance(loaded, dict):
        _entries.update(loaded)
    return _entries


def _schedule_save() -> None:
    global _unsaved
    if not _unsaved:
        _unsaved = True
        import atexit

        atexit.register(save)


def save() -> None:
    """Write the patterns compiled so far into the cache file (atomically); at most 1000
    entries, those this process used first. Does nothing when bytecode is not written.

    >>> save()  # what exit would do
    """
    global _unsaved
    path = cache_path()
    if not _unsaved or path is None or sys.dont_write_bytecode or _entries is None:
        return
    import marshal

    entries = _entries
    if len(entries) > 1000:
        entries = {key: entries[key] for key in _used if key in entries}
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(marshal.dumps(entries))
        os.replace(temporary, path)
        _unsaved = False
    except OSError:  # a read-only installation: compile each time, as without the cache
        try:
            os.unlink(temporary)
        except OSError:
            pass
