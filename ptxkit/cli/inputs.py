"""Which files a command reads: the files named, and the ``*.ptx`` files of the folders
named, less what ``--exclude`` patterns match.

A folder walk leaves out what is not source: folders whose name starts with a dot
(``.git``, ``.venv``), build output (`BUILD_FOLDERS`), and, inside a git work tree, what
git ignores (``git check-ignore``, so every ``.gitignore``, ``.git/info/exclude`` and
the user's global excludes count, as git reads them). A folder or file named on the
command line is always read, unless an exclude pattern matches it.

An exclude pattern is matched as a ``.gitignore`` line is, against paths relative to
its base folder (the working folder for ``--exclude``, the ``pyproject.toml``'s folder
for the configuration's): a pattern with no ``/`` but a trailing one matches a name at
any depth (``*.gen.ptx``, ``vendor``), one with a ``/`` matches from the base
(``third_party/**/*.ptx``, ``/old``); ``*`` and ``?`` stay within a name, ``**`` spans
folders, and a pattern that matches a folder excludes everything in it.

>>> rule = Exclude("vendor", "/repo")
>>> rule.matches("/repo/vendor/cutlass/k.ptx"), rule.matches("/repo/kernels/k.ptx")
(True, False)
"""

from __future__ import annotations

import os
import re

#: Folders of build output that a walk does not enter (below the folder named).
BUILD_FOLDERS = frozenset({"build", "dist", "node_modules", "__pycache__"})


class Exclude:
    """One exclude pattern and the folder it is relative to.

    >>> Exclude("third_party/**/*.ptx", "/r").matches("/r/third_party/a/b/k.ptx")
    True
    >>> Exclude("*.gen.ptx", "/r").matches("/elsewhere/k.gen.ptx"), Exclude("/k.ptx", "/r").matches("/r/s/k.ptx")
    (True, False)
    """

    __slots__ = ("pattern", "base", "anchored", "regex")

    def __init__(self, pattern: str, base: str):
        self.pattern = pattern
        self.base = os.path.abspath(base)
        body = pattern.rstrip("/")
        self.anchored = "/" in body
        self.regex = re.compile(_translate(body.lstrip("/")))

    def __repr__(self) -> str:
        return f"Exclude({self.pattern!r}, {self.base!r})"

    def __reduce__(self):  # compiled patterns travel to -j workers as their text
        return Exclude, (self.pattern, self.base)

    def matches(self, path: str) -> bool:
        """True when `path`, or a folder it is in (below the base), matches."""
        relative = os.path.relpath(os.path.abspath(path), self.base).replace(os.sep, "/")
        parts = relative.split("/")
        if self.anchored:
            if parts[0] == "..":
                return False
            return any(self.regex.fullmatch("/".join(parts[:end])) for end in range(1, len(parts) + 1))
        if parts[0] == "..":  # outside the base: its own name and nothing above
            parts = [parts[-1]]
        return any(self.regex.fullmatch(part) for part in parts)


def _translate(glob: str) -> str:
    """A glob as a regular expression over ``/``-separated paths.

    >>> bool(re.fullmatch(_translate("a/**/b*.ptx"), "a/b1.ptx")), bool(re.fullmatch(_translate("a/*"), "a/b/c"))
    (True, False)
    """
    out, index = [], 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:[^/]*/)*")
            index += 3
            continue
        if glob.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and _class_end(glob, index) > 0:
            end = _class_end(glob, index)
            body = glob[index + 1:end]
            body = "^" + body[1:] if body[:1] in ("!", "^") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            index = end + 1
            continue
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def _class_end(glob: str, start: int) -> int:
    """Where the ``[...]`` set opening at `start` closes (a ``]`` first in it is a member),
    or -1: then the ``[`` stands for itself."""
    index = start + 1
    if glob[index:index + 1] in ("!", "^"):
        index += 1
    if glob[index:index + 1] == "]":
        index += 1
    return glob.find("]", index)


def expand(paths: list[str], excludes: list[Exclude] = (), use_git: bool = True) -> list[str]:
    """The input files: files (and ``-``) as given, folders walked for ``*.ptx`` in
    sorted order (see the module docstring), less what `excludes` match. Raises
    `ValueError` for a folder with no ``.ptx`` file at all.

    >>> expand(["-", "samples/toolchain/empty.ptx"], [Exclude("toolchain", ".")])
    ['-']
    """
    files = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            found = _walk(path)
            if not found:
                raise ValueError(f"{path}: no .ptx files in this folder")
            if use_git:
                found = _not_ignored(path, found)
            files.extend(found)
        else:
            files.append(path)
    return [f for f in files if f == "-" or not any(rule.matches(f) for rule in excludes)]


def _walk(folder: str) -> list[str]:
    found = []
    for parent, subfolders, names in os.walk(folder):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".") and name not in BUILD_FOLDERS)
        found.extend(os.path.join(parent, name) for name in sorted(names) if name.endswith(".ptx"))
    return found


def _not_ignored(folder: str, files: list[str]) -> list[str]:
    """`files` (found under `folder`) less what git ignores, when `folder` is in a git
    work tree and git runs; all of them otherwise."""
    if repository_root(folder) is None:
        return files
    import subprocess

    try:
        done = subprocess.run(["git", "-C", folder, "check-ignore", "--stdin", "-z"],
                              input="\0".join(os.path.relpath(f, folder) for f in files).encode(),
                              capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return files
    if done.returncode not in (0, 1):  # 1: nothing ignored; 128: not a work tree after all, or an error
        return files
    ignored = {os.path.normpath(os.path.join(folder, name.decode())) for name in done.stdout.split(b"\0") if name}
    return [f for f in files if os.path.normpath(f) not in ignored]


def repository_root(folder: str) -> str | None:
    """The nearest folder at or above `folder` holding ``.git`` (a folder, or a file in
    a worktree or submodule), or None.

    >>> repository_root("/") is None or os.path.exists(os.path.join(repository_root("/"), ".git"))
    True
    """
    current = os.path.abspath(folder)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
