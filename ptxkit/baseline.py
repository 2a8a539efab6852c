"""Baselines: the fence check's reports of today, recorded so that only new ones fail.

``ptxkit fence --check --write-baseline FILE`` records each reported (access, async op)
pair as a `Key`: the file (relative to the baseline's folder), the function, the hazard
and the async operation's instruction text, normalised (comments dropped, white space
collapsed). Line numbers are not in the key, so an edit that only moves code keeps the
baseline valid; an instruction that changes, or one more report of the same key than
the baseline holds, is new. ``--baseline FILE`` then silences the recorded ones.

The file is JSON, one report per line, sorted, so that it reads well in a review::

    {"version": 1, "reports": [
     {"file": "kernels/gemm.ptx", "function": "gemm", "hazard": "war", "instruction": "…;", "count": 1}
    ]}

>>> key = Key("k.ptx", "k", "war", normalised("@%p1  cp.async.bulk.tensor.1d [%r1], [%rd1]; // load"))
>>> key.instruction
'@%p1 cp.async.bulk.tensor.1d [%r1], [%rd1];'
>>> baseline = Baseline.of([key, key]); baseline.take(key), baseline.take(key), baseline.take(key)
(True, True, False)
"""

from __future__ import annotations

import collections
import os
import re

from ptxkit._records import Record
from ptxkit._regex import compile as compile_pattern

#: The version of the file's shape.
VERSION = 1

_COMMENT = compile_pattern(r"//[^\n]*|/\*.*?\*/", re.S)
_SPACE = compile_pattern(r"\s+")


class Key(Record):
    """What identifies one recorded report, lines aside."""

    file: str
    function: str
    hazard: str
    instruction: str


def normalised(statement: str) -> str:
    """An instruction's text with comments dropped and each run of white space one space.

    >>> normalised("\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 /* A */ {%f1,\\n\\t  %f2}, %rd1;")
    'wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2}, %rd1;'
    """
    return _SPACE.sub(" ", _COMMENT.sub(" ", statement)).strip()


def statement_at(lines: list[str], line: int, column: int) -> str:
    """The statement that starts at `line`:`column` (1-based) of a text split into
    `lines`, up to its ``;`` (a statement may span lines), normalised.

    >>> statement_at(["\\tst.shared.u32 [%r1], 0;  // zero", "\\tret;"], 1, 2)
    'st.shared.u32 [%r1], 0;'
    """
    parts = []
    text = lines[line - 1][column - 1:]
    for index in range(line, len(lines) + 1):
        code = _COMMENT.sub(" ", text)
        end = code.find(";")
        if end >= 0:
            parts.append(code[:end + 1])
            break
        parts.append(code)
        if index == len(lines):
            break
        text = lines[index]
    return normalised(" ".join(parts))


class Baseline:
    """The recorded reports, as counts by `Key`; `take` consumes one.

    >>> Baseline.of([]).take(Key("k.ptx", "k", "raw", "wgmma;"))
    False
    """

    def __init__(self, counts: collections.Counter, path: str | None = None):
        self.counts = counts
        self.path = path
        self._files = None  # file -> its counts, made by the first `of_file`

    @classmethod
    def of(cls, keys, path: str | None = None) -> "Baseline":
        return cls(collections.Counter(keys), path)

    def of_file(self, file: str) -> "Baseline":
        """A copy holding only the keys of `file` (one file's check consumes that).

        >>> Baseline.of([Key("a.ptx", "k", "raw", "x;"), Key("b.ptx", "k", "raw", "x;")]).of_file("a.ptx").counts
        Counter({Key(file='a.ptx', function='k', hazard='raw', instruction='x;'): 1})
        """
        if self._files is None:
            self._files = {}
            for key, count in self.counts.items():
                self._files.setdefault(key.file, collections.Counter())[key] = count
        return Baseline(collections.Counter(self._files.get(file, ())), self.path)

    def take(self, key: Key) -> bool:
        """True (and one fewer left) when the baseline holds `key`."""
        if self.counts[key] <= 0:
            return False
        self.counts[key] -= 1
        return True


def file_key(path: str, folder: str) -> str:
    """`path` relative to `folder`, with forward slashes.

    >>> file_key("/work/k.ptx", "/work")
    'k.ptx'
    """
    return os.path.relpath(os.path.abspath(path), folder).replace(os.sep, "/")


def load(path: str) -> Baseline:
    """Read a baseline file; `ValueError` with the reason when it is not one.

    >>> import json, os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     name = os.path.join(folder, "b.json")
    ...     _ = open(name, "w").write(dumps([Key("k.ptx", "k", "war", "ret;")] * 2))
    ...     load(name).counts
    Counter({Key(file='k.ptx', function='k', hazard='war', instruction='ret;'): 2})
    """
    import json

    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not a ptxkit baseline (not JSON: {err})") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("reports"), list):
        raise ValueError(f"{path}: not a ptxkit baseline of version {VERSION} "
                         "(make one with ptxkit fence --check --write-baseline)")
    counts = collections.Counter()
    for entry in data["reports"]:
        try:
            key = Key(*(str(entry[field]) for field in Key._fields))
            counts[key] += int(entry.get("count", 1))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: a report without {', '.join(Key._fields)} and a count: {entry!r}") from None
    return Baseline(counts, path)


def dumps(keys) -> str:
    """The text of the baseline of `keys` (repeats counted).

    >>> print(dumps([Key("k.ptx", "k", "war", "ret;")]), end="")
    {"version": 1, "reports": [
     {"file": "k.ptx", "function": "k", "hazard": "war", "instruction": "ret;", "count": 1}
    ]}
    """
    import json

    counts = collections.Counter(keys)
    lines = [json.dumps({**key._asdict(), "count": count}) for key, count in sorted(counts.items())]
    return '{"version": %d, "reports": [\n%s\n]}\n' % (VERSION, ",\n".join(" " + line for line in lines))
