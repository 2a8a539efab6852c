"""``ptxkit fence`` settings from ``[tool.ptxkit]`` in the nearest ``pyproject.toml``.

The file is looked for in the folder that holds the inputs (their common folder) and the
folders above it, up to the root of the git repository they are in; the first
``pyproject.toml`` found is the project's, and its ``[tool.ptxkit]`` table, when it has
one, sets what the command line leaves unset (a flag given on the command line wins;
``--exclude`` patterns add to the file's)::

    [tool.ptxkit]
    fence-side = "writer"          # --fence-side
    war = false                    # --no-war
    exclude = ["third_party", "**/*_ref.ptx"]
    baseline = "ci/ptxkit-baseline.json"
    strict = true

The keys are the long options' names (`KEYS`); paths (``baseline``) and ``exclude``
patterns are relative to the file's folder. An unknown key or a value of the wrong kind
is an error (exit code 2), so that a typo does not pass silently.

>>> import tempfile, os
>>> with tempfile.TemporaryDirectory() as folder:
...     _ = open(os.path.join(folder, "pyproject.toml"), "w").write('[tool.ptxkit]\\nwar = false\\n')
...     os.mkdir(os.path.join(folder, "kernels"))
...     found = find([os.path.join(folder, "kernels", "k.ptx")])
...     found.settings, os.path.basename(found.path)
({'war': False}, 'pyproject.toml')
"""

from __future__ import annotations

import os

from ptxkit._records import Record

#: key -> (argument name, what it takes: a tuple of choices, bool, int range, "path", "patterns")
KEYS = {
    "placement": ("placement", "PLACEMENTS"),
    "fence-variant": ("fence_variant", "FENCE_VARIANTS"),
    "extern-policy": ("extern_policy", "EXTERN_POLICIES"),
    "track-global": ("track_global", bool),
    "fence-side": ("fence_side", "FENCE_SIDES"),
    "war": ("war", bool),
    "max-cluster-size": ("max_cluster", range(1, 17)),
    "exclude": ("exclude", "patterns"),
    "baseline": ("baseline", "path"),
    "strict": ("strict", bool),
}


class Config(Record):
    """The settings of one ``pyproject.toml`` (argument name -> value; paths made
    relative to the working folder's view, patterns kept with their folder)."""

    path: str | None
    settings: dict


def find(inputs: list[str]) -> Config:
    """The configuration for `inputs` (files or folders; ``-`` counts as the working
    folder): the nearest ``pyproject.toml`` at or above their common folder, within the
    git repository they are in. An empty `Config` when there is none or it has no
    ``[tool.ptxkit]``."""
    path = _nearest(_common_folder(inputs))
    if path is None:
        return Config(None, {})
    with open(path, "rb") as handle:
        data = handle.read()
    if b"tool.ptxkit" not in data and b"[tool]" not in data:  # most pyproject.toml files: no parse
        return Config(path, {})
    import tomllib

    try:
        table = tomllib.loads(data.decode("utf-8")).get("tool", {}).get("ptxkit", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid TOML: {err}") from None
    return Config(path, _settings(table, path))


def _settings(table: dict, path: str) -> dict:
    from ptxkit.cfg.fence import options

    folder = os.path.dirname(path)
    settings = {}
    for key, value in table.items():
        name = key.replace("_", "-")
        if name not in KEYS:
            raise ValueError(f"{path}: [tool.ptxkit] has no key {key!r} (the keys: {', '.join(KEYS)})")
        dest, kind = KEYS[name]
        if isinstance(kind, str) and kind.isupper():
            kind = getattr(options, kind)
        where = f"{path}: [tool.ptxkit] {key}"
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{where} takes true or false, not {value!r}")
        elif kind == "path":
            if not isinstance(value, str) or not value:
                raise ValueError(f"{where} takes a path, not {value!r}")
            value = os.path.join(folder, value)
        elif kind == "patterns":
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
                raise ValueError(f"{where} takes a list of glob patterns, not {value!r}")
            value = [(pattern, folder) for pattern in value]
        elif value not in kind or isinstance(value, bool):
            shown = f"{kind.start}..{kind.stop - 1}" if isinstance(kind, range) else ", ".join(kind)
            raise ValueError(f"{where} takes one of {shown}, not {value!r}")
        settings[dest] = value
    return settings


def _common_folder(inputs: list[str]) -> str:
    folders = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or ".") if p != "-" else os.getcwd()
               for p in inputs] or [os.getcwd()]
    try:
        return os.path.commonpath(folders)
    except ValueError:  # different drives
        return os.getcwd()


def _nearest(folder: str) -> str | None:
    """The first ``pyproject.toml`` at or above `folder`, not above a repository root."""
    current = folder
    while True:
        candidate = os.path.join(current, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(current)
        if parent == current or os.path.exists(os.path.join(current, ".git")):
            return None
        current = parent
