"""A content-addressed on-disk cache of cubins, shared safely between processes, with a
size cap and least-recently-used eviction.

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

Size: at most ``$PTXKIT_CACHE_MAX`` bytes (``500M``, ``2G``, ``65536``; K, M, G and T are
powers of 1024; ``0``: no cap), `DEFAULT_LIMIT` (1 GiB) by default. An entry's
modification time is its last use: a hit sets it to now. The folder's running total
(the file ``size``, updated under the lock ``lock``) grows with each new entry; once it
passes the cap, the folder is scanned and the least recently used entries are removed
until 90% of the cap is left, so a scan (4 µs of CPU per entry) comes once per tenth of
the cap written, not with every entry. A total that drifted (files deleted by hand, two
processes storing the same entry) is put right by the next scan. Every step tolerates
other processes writing, reading and evicting in the same folder at the same time (an
entry that vanishes was evicted by someone else; a reader holding an evicted file still
reads it whole). ``ptxkit cache info`` and ``ptxkit cache clear`` show and empty it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import sys
import tempfile
import time
import warnings
from pathlib import Path

_MAGIC = b"PTXKITC1"
#: magic, length of the log, length of the cubin, SHA-256 of log + cubin
_HEADER = struct.Struct("<8sQQ32s")
#: The cap when ``$PTXKIT_CACHE_MAX`` is not set: 1 GiB, some thousands of cubins.
DEFAULT_LIMIT = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
#: A temporary file this old was left by a writer that died; eviction removes it.
_STALE_SECONDS = 3600
#: Eviction leaves this fraction of the cap, so that the next scan is far off.
_EVICT_TO = 0.9


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


def parse_size(text: str) -> int:
    """Bytes from ``500M``, ``2G``, ``1.5G``, ``64KiB`` or ``65536`` (K, M, G, T: powers of 1024).

    >>> parse_size("500M"), parse_size("1.5g"), parse_size("64KiB"), parse_size("4096")
    (524288000, 1610612736, 65536, 4096)
    >>> parse_size("lots")
    Traceback (most recent call last):
    ValueError: expected a size such as 500M, 2G or a number of bytes, got 'lots'
    """
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", text, re.IGNORECASE)
    if match is None:
        raise ValueError(f"expected a size such as 500M, 2G or a number of bytes, got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def cache_limit() -> int | None:
    """The cap in bytes: ``$PTXKIT_CACHE_MAX``, else `DEFAULT_LIMIT`; None for ``0`` (no cap).
    Raises ValueError for a value that is not a size.

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_CACHE_MAX="500M"):
    ...     cache_limit()
    524288000
    """
    setting = os.environ.get("PTXKIT_CACHE_MAX", "").strip()
    if not setting:
        return DEFAULT_LIMIT
    try:
        limit = parse_size(setting)
    except ValueError as err:
        raise ValueError(f"PTXKIT_CACHE_MAX: {err}") from None
    return limit or None


def default_cache() -> CubinCache | None:
    """The cache at `cache_directory()` with the cap of `cache_limit()` (a bad
    ``$PTXKIT_CACHE_MAX`` warns and keeps the default), or None when caching is off.

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_CACHE_DIR="0"):
    ...     default_cache() is None
    True
    """
    directory = cache_directory()
    if directory is None:
        return None
    try:
        limit = cache_limit()
    except ValueError as err:
        warnings.warn(f"ptxkit: {err}; the cubin cache keeps its default cap", stacklevel=2)
        limit = DEFAULT_LIMIT
    return CubinCache(directory, limit)


class CacheEntry:
    """One file of the cache as a scan found it: path, size in bytes, last use."""

    __slots__ = ("path", "size", "used")

    def __init__(self, path: str, size: int, used: float):
        self.path, self.size, self.used = path, size, used


class CubinCache:
    """Cubins (with the ptxas log that came with them) stored by key in one folder, at
    most `limit` bytes of them (None: no cap).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     store = CubinCache(folder)
    ...     store.put("ab12", b"cubin", "log")
    ...     store.get("ab12"), store.get("cd34"), store.path("ab12").relative_to(folder).as_posix()
    ((b'cubin', 'log'), None, 'ab/ab12.entry')
    """

    def __init__(self, directory, limit: int | None = None):
        self.directory = Path(directory)
        self.limit = limit

    def path(self, key: str) -> Path:
        """The file that holds (or would hold) the entry for `key`."""
        return self.directory / key[:2] / f"{key}.entry"

    def get(self, key: str) -> tuple[bytes, str] | None:
        """(cubin, log) for `key`, or None when absent, truncated or damaged. A hit
        becomes the most recently used entry."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        entry = _decode(raw)
        try:
            if entry is None:  # damaged: drop it so that it is rebuilt
                path.unlink()
            else:
                os.utime(path)
        except OSError:  # evicted meanwhile, or a cache we may only read
            pass
        return entry

    def put(self, key: str, data: bytes, log: str) -> None:
        """Store an entry atomically, then evict down to the cap; a cache that cannot
        be written only warns. An entry larger than the whole cap is not stored."""
        encoded = _encode(data, log)
        if self.limit is not None and len(encoded) > self.limit:
            return
        path = self.path(key)
        temporary = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(encoded)
            os.replace(temporary, path)
            temporary = None
        except OSError as err:
            warnings.warn(f"ptxkit: could not write the cubin cache at {path}: {err}", stacklevel=3)
            return
        finally:
            if temporary is not None:
                _remove(temporary)
        if self.limit is not None:
            try:
                self._account(len(encoded), keep=str(path))
            except OSError as err:
                warnings.warn(f"ptxkit: could not keep the cubin cache at {self.directory} to its cap: {err}",
                              stacklevel=3)

    def _account(self, added: int, keep: str) -> None:
        """Add `added` bytes to the folder's running total; past the cap, scan and evict."""
        with self._locked():
            total = self._recorded_total()
            total = sum(entry.size for entry in self.scan()) if total is None else total + added
            if total > self.limit:
                total = self.evict(int(self.limit * _EVICT_TO), keep)
            self._record_total(total)

    @contextlib.contextmanager
    def _locked(self):
        """The folder's lock, held by one process at a time (on systems without
        ``fcntl``, none: the total is then an estimate that scans put right)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _recorded_total(self) -> int | None:
        try:
            return int((self.directory / "size").read_text())
        except (OSError, ValueError):  # none yet, or damaged: scan
            return None

    def _record_total(self, total: int) -> None:
        (self.directory / "size").write_text(f"{total}\n")

    def size(self) -> tuple[int, int]:
        """(entries, bytes) of the cache, counted now, and recorded as its running total.

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     store = CubinCache(folder); store.put("ab12", b"cubin", "log")
        ...     store.size()[0]
        1
        """
        entries = self.scan()
        total = sum(entry.size for entry in entries)
        with contextlib.suppress(OSError), self._locked():
            self._record_total(total)
        return sum(entry.path.endswith(".entry") for entry in entries), total

    def scan(self) -> list[CacheEntry]:
        """Every file of the cache (entries, and temporary files of writers at work or
        dead), found now; files that vanish during the scan are left out."""
        found = []
        try:
            folders = list(os.scandir(self.directory))
        except OSError:
            return found
        for folder in folders:
            if len(folder.name) != 2 or not folder.is_dir(follow_symlinks=False):
                continue
            try:
                files = list(os.scandir(folder.path))
            except OSError:
                continue
            for file in files:
                if not (file.name.endswith(".entry") or file.name.startswith(".tmp-")):
                    continue
                try:
                    info = file.stat(follow_symlinks=False)
                except OSError:  # evicted by another process
                    continue
                found.append(CacheEntry(file.path, info.st_size, info.st_mtime))
        return found

    def evict(self, limit: int, keep: str | None = None) -> int:
        """Remove the least recently used entries (never `keep`) until the cache holds
        at most `limit` bytes, and temporary files left by dead writers; returns the
        bytes left.

        >>> import os, tempfile, time
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     store = CubinCache(folder)
        ...     for age, key in ((300, "aa01"), (200, "bb02"), (100, "cc03")):
        ...         store.put(key, bytes(100), "")
        ...         os.utime(store.path(key), (time.time() - age,) * 2)
        ...     _ = store.get("aa01")  # used now: bb02 is the least recently used
        ...     left = store.evict(2 * store.path("aa01").stat().st_size)
        ...     sorted(e.path[-10:] for e in store.scan())
        ['aa01.entry', 'cc03.entry']
        """
        entries = self.scan()
        now = time.time()
        total = 0
        for entry in entries:
            if os.path.basename(entry.path).startswith(".tmp-") and now - entry.used > _STALE_SECONDS:
                _remove(entry.path)
            else:
                total += entry.size
        for entry in sorted((e for e in entries if e.path.endswith(".entry")), key=lambda e: e.used):
            if total <= limit:
                break
            if entry.path != keep:
                _remove(entry.path)
                total -= entry.size  # gone, whoever removed it
        return total

    def clear(self) -> tuple[int, int]:
        """Remove every entry (and temporary file) and the emptied two-letter folders;
        returns (files removed, their bytes). Nothing else in the folder is touched.

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     store = CubinCache(folder); store.put("ab12", b"cubin", "log")
        ...     store.clear()[0], store.scan()
        (1, [])
        """
        count = size = 0
        folders = set()
        for entry in self.scan():
            if _remove(entry.path):
                count += 1
                size += entry.size
            folders.add(os.path.dirname(entry.path))
        for folder in folders:
            try:
                os.rmdir(folder)
            except OSError:  # not empty: another process wrote meanwhile
                pass
        _remove(str(self.directory / "size"))  # the next entry counts the folder again
        return count, size


def _remove(path: str) -> int:
    """Unlink `path`; 1 when this call removed it, 0 when it was gone already (another
    process evicted it) or may not be removed."""
    try:
        os.unlink(path)
    except OSError:
        return 0
    return 1


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
