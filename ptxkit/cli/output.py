"""Where a command's output goes (``-o OUT``, ``-i``): standard output for ``-``, else
the file written as a compiler writes its output.

- A regular file is replaced atomically (a temporary file in its folder, then a rename):
  a reader sees the old contents or the new, never a part. A new file gets the mode the
  umask gives (0644 under umask 022); an existing one keeps its mode and owner.
- A symbolic link: its target is written that way; the link stays.
- Anything that is not a regular file (a device such as ``/dev/null``, a FIFO) is written
  through, as ptxas writes it; ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N`` write to
  the process's own descriptor (appending where the shell opened it with ``>>``).
- A file with several hard links, or one whose folder may not be written or whose owner
  could not be kept, is rewritten in place: its old contents are saved first (in memory,
  and in a hidden file beside it when the folder allows) and put back if the write fails.
- Errors name the path as the user gave it: ``cannot write nodir/k.ptx: the folder
  nodir does not exist`` (a `UsageError`, exit code 2).

>>> import os, tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     path = os.path.join(folder, "k.cubin")
...     write_file(path, b"cubin")
...     open(path, "rb").read(), os.listdir(folder)
(b'cubin', ['k.cubin'])
"""

from __future__ import annotations

import os
import stat
import sys

from .common import UsageError

#: Paths that name a descriptor of this process (``-`` is standard output).
_DESCRIPTORS = {"-": 1, "/dev/stdout": 1, "/dev/stderr": 2}


def write_output(text: str, path: str | None) -> None:
    """Write `text` to standard output (`path` None or ``-``), else to the file `path`
    (`write_file`).

    >>> write_output(".version 8.0\\n", "-")
    .version 8.0
    """
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_file(path, text.encode("utf-8"))


def write_file(path: str, data: bytes) -> None:
    """Write `data` to `path` as a compiler writes its output (the module's docstring
    says how for each kind of path); a failure raises `UsageError` naming `path` and
    leaves what was there as it was.

    >>> write_file("/nonexistent-folder/k.ptx", b"")
    Traceback (most recent call last):
    ptxkit.cli.common.UsageError: cannot write /nonexistent-folder/k.ptx: the folder /nonexistent-folder does not exist
    """
    try:
        descriptor = descriptor_of(path)
        if descriptor is not None:
            _write_descriptor(descriptor, data)
            return
        try:
            info = os.stat(path)  # through links
        except FileNotFoundError:
            info = None  # a new file (or a new target of a dangling link)
        if info is not None and not stat.S_ISREG(info.st_mode):
            with open(path, "wb") as handle:  # a device, a FIFO: written through
                handle.write(data)
            return
        target = os.path.realpath(path)  # a link's target is written; the link stays
        if info is not None and info.st_nlink > 1:
            rewrite_in_place(target, data)
        elif not _replace(target, data, info):
            rewrite_in_place(target, data)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {_reason(path, err)}") from None


def descriptor_of(path: str) -> int | None:
    """The descriptor number a path names (``-``, ``/dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/3``), or None for an ordinary path.

    >>> descriptor_of("-"), descriptor_of("/dev/fd/3"), descriptor_of("out.ptx")
    (1, 3, None)
    """
    if path in _DESCRIPTORS:
        return _DESCRIPTORS[path]
    for prefix in ("/dev/fd/", "/proc/self/fd/"):
        if path.startswith(prefix) and path[len(prefix):].isdigit():
            return int(path[len(prefix):])
    return None


def _write_descriptor(descriptor: int, data: bytes) -> None:
    """Write to one of this process's descriptors, after what its own streams hold."""
    streams = {1: sys.stdout, 2: sys.stderr}
    for stream in streams.values():
        stream.flush()
    if descriptor in streams:
        streams[descriptor].buffer.write(data)
        streams[descriptor].flush()
        return
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


def _replace(target: str, data: bytes, info: os.stat_result | None) -> bool:
    """Replace the regular file `target` (`info`: its status, None when new) in one
    rename. False, with nothing changed, when that cannot keep what the file is: the
    folder may not be written (the file may) or the owner cannot be kept."""
    try:
        fd, temporary = hidden_file(os.path.dirname(target), ".ptxkit-")
    except PermissionError:
        if info is not None and os.access(target, os.W_OK):
            return False
        raise
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if info is not None and not _same_owner(handle.fileno(), info):
                return False
        os.chmod(temporary, new_file_mode() if info is None else stat.S_IMODE(info.st_mode))
        os.replace(temporary, target)
        temporary = None
    finally:
        if temporary is not None:
            _remove(temporary)
    return True


def hidden_file(folder: str, prefix: str) -> tuple[int, str]:
    """A new file in `folder` (the current one for ``""``) named `prefix` and twelve
    random hex digits, made by this call alone (``O_EXCL``) with mode 0600, open for
    writing: ``(descriptor, path)``. What ``tempfile.mkstemp`` makes, without importing
    ``tempfile`` (with ``shutil``, ``random`` and the compression modules behind it:
    3-4 ms of every ``ptxkit fence -o`` process, measured here).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     fd, path = hidden_file(folder, ".k-")
    ...     os.close(fd)
    ...     name = os.path.basename(path)
    ...     name.startswith(".k-"), len(name), oct(os.stat(path).st_mode & 0o777)
    (True, 15, '0o600')
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):  # a name taken already: draw another, as mkstemp does
        path = os.path.join(folder, prefix + os.urandom(6).hex())
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a file beginning {prefix} in {folder or '.'}")


def _same_owner(fd: int, info: os.stat_result) -> bool:
    """Give the file open at `fd` the owner and group of `info`; False when not allowed."""
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) == (info.st_uid, info.st_gid):
        return True
    try:
        os.fchown(fd, info.st_uid, info.st_gid)
    except PermissionError:
        return False
    return True


def rewrite_in_place(path: str, data: bytes) -> None:
    """Overwrite the regular file `path` with `data`, keeping its inode (hard links,
    owner, mode). Its old contents are saved first, in memory and in a hidden file beside
    it when the folder allows; a failed write puts them back, and should that fail too,
    the error says where the saved copy is. Nothing is lost.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path, link = os.path.join(folder, "k.ptx"), os.path.join(folder, "same.ptx")
    ...     _ = open(path, "wb").write(b"old contents"); os.link(path, link)
    ...     rewrite_in_place(path, b"new")
    ...     open(link, "rb").read(), sorted(os.listdir(folder))
    (b'new', ['k.ptx', 'same.ptx'])
    """
    with open(path, "r+b") as handle:
        old = handle.read()
        saved = _save_copy(path, old)
        try:
            _overwrite(handle, data)
        except BaseException as failure:
            try:
                _overwrite(handle, old)
            except OSError:
                if saved is not None and isinstance(failure, OSError):
                    raise OSError(failure.errno, f"{failure.strerror}; its old contents are in {saved}") from None
                raise failure from None
            _remove(saved)
            raise
        _remove(saved)


def _overwrite(handle, data: bytes) -> None:
    handle.seek(0)
    handle.write(data)
    handle.truncate()
    handle.flush()
    os.fsync(handle.fileno())


def _save_copy(path: str, data: bytes) -> str | None:
    """A hidden copy of `data` beside `path` (None when its folder may not be written)."""
    folder, name = os.path.split(path)
    try:
        fd, copy = hidden_file(folder, f".{name}.ptxkit-old-")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError:
        _remove(copy)
        return None
    return copy


def _remove(path: str | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _reason(path: str, err: OSError) -> str:
    """Why `path` could not be written, in words that name what the user gave.

    >>> import errno
    >>> _reason("/nonexistent/k.ptx", FileNotFoundError(errno.ENOENT, "No such file or directory"))
    'the folder /nonexistent does not exist'
    """
    folder = os.path.dirname(path)
    if isinstance(err, FileNotFoundError) and folder and not os.path.isdir(folder):
        return f"the folder {folder} does not exist"
    if isinstance(err, NotADirectoryError) and folder:
        return f"{folder} is not a folder"
    return err.strerror or str(err)


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0666 less the process's umask.

    >>> import os
    >>> old = os.umask(0o022); mode = new_file_mode(); _ = os.umask(old)
    >>> oct(mode)
    '0o644'
    """
    mask = os.umask(0o022)  # the only portable way to read the umask is to set it
    os.umask(mask)
    return 0o666 & ~mask
