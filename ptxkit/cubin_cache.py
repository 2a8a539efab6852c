"""A content-addressed on-disk cache of cubins, shared safely between processes.

>>> import tempfile
>>> store = CubinCache(tempfile.mkdtemp())
>>> key = cache_key(b".version 8.0 ...", "sm_90a", "13.0.88")
>>> store.put(key, b"\\x7fELF...", "ptxas info    : ...\\n")
>>> store.get(key)
(b'\\x7fELF...', 'ptxas info    : ...\\n')

The key is a SHA-256 over everything that decides the output (PTX bytes, arch, options,
ptxas version). Each entry is written to a temporary file in the cache folder and renamed
into place, so a reader sees either no entry or a whole one. Every entry starts with a
header holding the lengths and a SHA-256 of its contents; a truncated or damaged entry
(a full disk, a crash, a bad copy) reads as a miss and is rebuilt.

Location: ``$PTXKIT_CACHE_DIR`` if set (``0`` turns the cache off), else the user cache
folder (``$XDG_CACHE_HOME/ptxkit/cubins``, ``~/.cache/ptxkit/cubins``,
``~/Library/Caches/ptxkit/cubins`` on macOS, ``%LOCALAPPDATA%\\ptxkit\\Cache\\cubins``).
Nothing is ever evicted; delete the folder to reclaim the space.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import tempfile
import warnings
from pathlib import Path

_MAGIC = b"PTXKITC1"
#: magic, length of the log, length of the cubin, SHA-256 of log + cubin
_HEADER = struct.Struct("<8sQQ32s")


def cache_key(*parts: bytes | str) -> str:
    """A hex SHA-256 over `parts` (each length-prefixed, so no two lists collide).

    >>> cache_key("a", "bc") == cache_key("ab", "c")
    False
    """
    digest = hashlib.sha256(b"ptxkit-cubin-1")
    for part in parts:
        raw = part.encode("utf-8") if isinstance(part, str) else bytes(part)
        digest.update(len(raw).to_bytes(8, "little"))
        digest.update(raw)
    return digest.hexdigest()


def cache_directory() -> Path | None:
    """Where cubins are cached, or None when ``$PTXKIT_CACHE_DIR`` is ``0``.

    >>> cache_directory()  # doctest: +SKIP
    PosixPath('/home/me/.cache/ptxkit/cubins')
    """
    setting = os.environ.get("PTXKIT_CACHE_DIR")
    if setting == "0":
        return None
    if setting:
        return Path(setting)
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
        return Path(base, "ptxkit", "Cache", "cubins")
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "ptxkit" / "cubins"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "ptxkit", "cubins")


def default_cache() -> CubinCache | None:
    """The cache at `cache_directory()`, or None when caching is turned off.

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_CACHE_DIR="0"):
    ...     default_cache() is None
    True
    """
    directory = cache_directory()
    return None if directory is None else CubinCache(directory)


class CubinCache:
    """Cubins (with the ptxas log that came with them) stored by key in one folder.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     store = CubinCache(folder)
    ...     store.put("ab12", b"cubin", "log")
    ...     store.get("ab12"), store.get("cd34"), store.path("ab12").relative_to(folder).as_posix()
    ((b'cubin', 'log'), None, 'ab/ab12.entry')
    """

    def __init__(self, directory):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        """The file that holds (or would hold) the entry for `key`."""
        return self.directory / key[:2] / f"{key}.entry"

    def get(self, key: str) -> tuple[bytes, str] | None:
        """(cubin, log) for `key`, or None when absent, truncated or damaged."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        entry = _decode(raw)
        if entry is None:  # damaged: drop it so that it is rebuilt
            try:
                path.unlink()
            except OSError:
                pass
        return entry

    def put(self, key: str, data: bytes, log: str) -> None:
        """Store an entry atomically; a cache that cannot be written only warns."""
        path = self.path(key)
        temporary = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_encode(data, log))
            os.replace(temporary, path)
        except OSError as err:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
            warnings.warn(f"ptxkit: could not write the cubin cache at {path}: {err}", stacklevel=3)


def _encode(data: bytes, log: str) -> bytes:
    text = log.encode("utf-8")
    digest = hashlib.sha256(text + data).digest()
    return _HEADER.pack(_MAGIC, len(text), len(data), digest) + text + data


def _decode(raw: bytes) -> tuple[bytes, str] | None:
    if len(raw) < _HEADER.size:
        return None
    magic, text_size, data_size, digest = _HEADER.unpack_from(raw)
    body = raw[_HEADER.size :]
    if magic != _MAGIC or len(body) != text_size + data_size or hashlib.sha256(body).digest() != digest:
        return None
    try:
        log = body[:text_size].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return body[text_size:], log
