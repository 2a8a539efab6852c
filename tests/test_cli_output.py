"""Outputs written as a compiler writes them, by every command that writes (``-o``, ``-i``):
regular files replaced atomically with the mode a compiler gives them, links kept, devices
and FIFOs written through, hard links kept by ``-i``, ``-`` for standard output, errors
that name the path given; and the same as another user (``/dev/null``, a read-only folder).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from ptxkit.cli.common import UsageError
from ptxkit.cli.main import main
from ptxkit.cli.output import descriptor_of, new_file_mode, rewrite_in_place, write_file

from conftest import SAMPLES, ptxas_available

IF_HOIST = SAMPLES / "fence" / "13_hoist_out_of_if.ptx"
VECTOR_ADD = SAMPLES / "toolchain" / "vector_add.ptx"

#: command -> its arguments, writing OUT
WRITERS = {
    "fence -o": ["fence", str(IF_HOIST), "-o", "OUT"],
    "cfg --dot -o": ["cfg", str(IF_HOIST), "--dot", "-o", "OUT"],
    "cfg --svg -o": pytest.param(["cfg", str(IF_HOIST), "--svg", "-o", "OUT"],
                                 marks=pytest.mark.skipif(shutil.which("dot") is None,
                                                          reason="Graphviz's dot is not installed")),
    "assemble -o": pytest.param(["assemble", str(VECTOR_ADD), "--no-cache", "-o", "OUT"],
                                marks=pytest.mark.ptxas),
    "gen -o": ["gen", "rowreduce", "--cols", "1024", "--dtype", "f32", "--op", "sum", "-o", "OUT"],
}
IDS = list(WRITERS)


def with_output(arguments, output) -> list[str]:
    return [str(output) if a == "OUT" else a for a in arguments]


def reference(arguments, tmp_path) -> bytes:
    """What the command writes to a new regular file."""
    target = tmp_path / "reference.out"
    assert main(with_output(arguments, target)) == 0
    data = target.read_bytes()
    target.unlink()
    return data


@pytest.fixture(params=[0o022, 0o002, 0o077], ids=["umask022", "umask002", "umask077"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# -- regular files ------------------------------------------------------------------------


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=IDS)
def test_new_outputs_get_the_mode_the_umask_gives(arguments, umask, tmp_path, capsys):
    target = tmp_path / "out"
    assert main(with_output(arguments, target)) == 0, capsys.readouterr().err
    assert mode_of(target) == 0o666 & ~umask
    assert os.listdir(tmp_path) == ["out"]  # no temporary file left behind


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=IDS)
def test_an_existing_output_keeps_its_mode_and_is_replaced(arguments, tmp_path, capsys):
    target = tmp_path / "out"
    target.write_text("old")
    target.chmod(0o640)
    reader = open(target, "rb")  # a reader of the old file keeps the old file: it was replaced
    assert main(with_output(arguments, target)) == 0, capsys.readouterr().err
    assert mode_of(target) == 0o640 and target.read_bytes() != b"old"
    assert reader.read() == b"old" and os.fstat(reader.fileno()).st_ino != target.stat().st_ino
    reader.close()


def test_in_place_keeps_the_inputs_mode(umask, tmp_path):
    copy = tmp_path / "k.ptx"
    copy.write_text(IF_HOIST.read_text())
    copy.chmod(0o604)
    assert main(["fence", "-i", str(copy)]) == 0
    assert mode_of(copy) == 0o604 and "fence.proxy.async" in copy.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_root_rewriting_another_users_file_keeps_its_owner(tmp_path):
    copy = tmp_path / "k.ptx"
    copy.write_text(IF_HOIST.read_text())
    os.chown(copy, 65534, 65534)
    assert main(["fence", "-i", str(copy)]) == 0
    assert (copy.stat().st_uid, copy.stat().st_gid) == (65534, 65534)
    assert "fence.proxy.async" in copy.read_text()


def test_new_file_mode_reads_the_umask_and_leaves_it(umask):
    assert new_file_mode() == 0o666 & ~umask
    assert os.umask(umask) == umask


def test_a_failed_write_leaves_the_destination_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "out"
    target.write_bytes(b"old")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(UsageError, match=f"cannot write {target}: No space left on device"):
        write_file(str(target), b"new")
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["out"]


# -- standard output ----------------------------------------------------------------------


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=IDS)
def test_dash_is_standard_output_for_every_command(arguments, tmp_path):
    expected = reference(arguments, tmp_path)
    done = subprocess.run([sys.executable, "-m", "ptxkit", *with_output(arguments, "-")], capture_output=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected and os.listdir(tmp_path) == []


def test_a_descriptor_path_appends_where_the_shell_said(tmp_path):
    """``-o /proc/self/fd/1 >> log`` (like ``/dev/stdout``) adds to the log, as the shell
    asked: the descriptor is written, not a file opened (and truncated) again by name.
    (``/proc`` rather than ``/dev/stdout``: a regression would rename into /proc, which
    fails, where it would replace the system's /dev/stdout link.)"""
    log = tmp_path / "log"
    log.write_text("earlier\n")
    command = f"{sys.executable} -m ptxkit fence {IF_HOIST} -o /proc/self/fd/1 >> {log}"
    done = subprocess.run(command, shell=True, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("earlier\n") and "fence.proxy.async" in text


@pytest.mark.parametrize("path, number", [("-", 1), ("/dev/stdout", 1), ("/dev/stderr", 2), ("/dev/fd/7", 7),
                                          ("/proc/self/fd/12", 12), ("/dev/fd/x", None), ("/dev/null", None)])
def test_descriptor_paths(path, number):
    assert descriptor_of(path) == number


# -- links --------------------------------------------------------------------------------


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=IDS)
def test_a_symlink_stays_and_its_target_is_written(arguments, tmp_path):
    expected = reference(arguments, tmp_path)
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out"
    target.write_bytes(b"old")
    target.chmod(0o600)
    link = tmp_path / "out"
    link.symlink_to(Path("real") / "out")
    assert main(with_output(arguments, link)) == 0
    assert link.is_symlink() and os.readlink(link) == str(Path("real") / "out")
    assert target.read_bytes() == expected and mode_of(target) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["out", "real"] and os.listdir(tmp_path / "real") == ["out"]


def test_a_dangling_symlink_gets_its_target_created(tmp_path):
    link = tmp_path / "out.ptx"
    link.symlink_to(tmp_path / "made.ptx")
    assert main(["fence", str(IF_HOIST), "-o", str(link)]) == 0
    assert link.is_symlink() and "fence.proxy.async" in (tmp_path / "made.ptx").read_text()
    assert mode_of(tmp_path / "made.ptx") == new_file_mode()


def test_in_place_through_a_symlink_rewrites_the_target(tmp_path):
    target = tmp_path / "k.ptx"
    target.write_text(IF_HOIST.read_text())
    link = tmp_path / "link.ptx"
    link.symlink_to("k.ptx")
    assert main(["fence", "-i", str(link)]) == 0
    assert link.is_symlink() and "fence.proxy.async" in target.read_text()


def test_in_place_keeps_hard_links(tmp_path):
    original = tmp_path / "k.ptx"
    original.write_text(IF_HOIST.read_text())
    other = tmp_path / "same-file.ptx"
    os.link(original, other)
    inode = original.stat().st_ino
    assert main(["fence", "-i", str(original)]) == 0
    assert original.stat().st_ino == other.stat().st_ino == inode and original.stat().st_nlink == 2
    assert "fence.proxy.async" in other.read_text()
    assert sorted(os.listdir(tmp_path)) == ["k.ptx", "same-file.ptx"]  # no saved copy left


def test_a_failed_rewrite_in_place_puts_the_old_contents_back(tmp_path, monkeypatch):
    original = tmp_path / "k.ptx"
    original.write_bytes(b"old contents, longer than the new")
    os.link(original, tmp_path / "other.ptx")
    calls = []
    real_fsync = os.fsync

    def fsync_failing_once(fd):
        calls.append(fd)
        if len(calls) == 2:  # the first is the saved copy's, the second the rewrite's
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_failing_once)
    with pytest.raises(UsageError, match=f"cannot write {original}: No space left on device"):
        write_file(str(original), b"new")
    assert original.read_bytes() == b"old contents, longer than the new"
    assert sorted(os.listdir(tmp_path)) == ["k.ptx", "other.ptx"]


def test_when_putting_back_fails_the_error_says_where_the_old_contents_are(tmp_path, monkeypatch):
    original = tmp_path / "k.ptx"
    original.write_bytes(b"precious")
    calls = []
    real_fsync = os.fsync

    def fsync_failing_after_the_copy(fd):
        calls.append(fd)
        if len(calls) > 1:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_failing_after_the_copy)
    with pytest.raises(OSError, match="its old contents are in ") as failure:
        rewrite_in_place(str(original), b"new")
    saved = str(failure.value).rsplit("its old contents are in ", 1)[1]
    assert Path(saved).parent == tmp_path and Path(saved).read_bytes() == b"precious"


# -- what is not a regular file: written through --------------------------------------------


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=IDS)
def test_a_fifo_is_written_through(arguments, tmp_path):
    expected = reference(arguments, tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        assert main(with_output(arguments, fifo)) == 0
    finally:
        reader.join(timeout=20)
        if reader.is_alive():  # nothing opened the FIFO for writing: let the reader go
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert received == [expected]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]


def device(folder: Path, name: str, minor: int) -> Path:
    """A character device of the memory driver (major 1: 3 null, 7 full) made in `folder`,
    so that a regression replaces a scratch node, never the system's /dev/null; skips
    where device nodes cannot be made."""
    path = folder / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, AttributeError):
        pytest.skip("making a device node needs root (CAP_MKNOD)")
    return path


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=IDS)
def test_a_null_device_is_written_through(arguments, tmp_path):
    null = device(tmp_path, "null", 3)
    before = os.stat(null)
    assert main(with_output(arguments, null)) == 0
    after = os.lstat(null)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert os.listdir(tmp_path) == ["null"]


def test_a_full_device_is_an_error_naming_it(tmp_path, capsys):
    full = device(tmp_path, "full", 7)
    assert main(["fence", str(IF_HOIST), "-o", str(full)]) == 2
    assert capsys.readouterr().err == f"ptxkit: error: cannot write {full}: No space left on device\n"
    assert stat.S_ISCHR(os.lstat(full).st_mode) and os.listdir(tmp_path) == ["full"]


# -- errors name the path given -----------------------------------------------------------


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=IDS)
def test_a_missing_folder_is_named(arguments, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(with_output(arguments, "nodir/out")) == 2
    assert capsys.readouterr().err == "ptxkit: error: cannot write nodir/out: the folder nodir does not exist\n"
    assert os.listdir(tmp_path) == []


# -- as another user ----------------------------------------------------------------------


NOBODY = 65534


@pytest.fixture(scope="module")
def as_nobody():
    """A runner of ``main(arguments)`` as the user nobody, in a forked child of this
    process (which has every module the commands load already imported: the Python
    running the tests may sit in a folder nobody cannot read). Returns (exit code,
    stderr). Skips unless this process is root and can fork."""
    if os.geteuid() != 0 or not hasattr(os, "fork"):
        pytest.skip("running a command as another user needs root and fork")
    scratch = Path(tempfile.mkdtemp(prefix="ptxkit-warm-up-"))
    try:  # as root first: everything these commands import is then loaded
        (scratch / "k.ptx").write_text(IF_HOIST.read_text())
        assert main(["fence", str(IF_HOIST), "-o", str(scratch / "out.ptx")]) == 0
        assert main(["fence", "-i", str(scratch / "k.ptx")]) == 0
        os.link(scratch / "k.ptx", scratch / "link.ptx")
        assert main(["fence", str(IF_HOIST), "-o", str(scratch / "k.ptx")]) == 0  # in place
        assert main(["fence", str(IF_HOIST), "-o", str(scratch / "nodir" / "k.ptx")]) == 2
        if ptxas_available():
            assert main(["assemble", str(VECTOR_ADD), "--no-cache", "-o", str(scratch / "k.cubin")]) == 0
    finally:
        shutil.rmtree(scratch)

    def run(arguments, cwd) -> tuple[int, str]:
        import contextlib
        import io
        import json

        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            try:
                os.close(read_end)
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                os.chdir(cwd)
                os.environ.update(HOME=str(cwd), PTXKIT_CACHE_DIR="0")
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    code = main(arguments)
                os.write(write_end, json.dumps([code, err.getvalue()]).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            answer = pipe.read()
        os.waitpid(pid, 0)
        assert answer, "the child running as nobody died"
        return tuple(json.loads(answer))

    return run


@pytest.fixture
def shared_folder():
    """A folder nobody may read (tmp_path's parents are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="ptxkit-output-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def _dev_leftovers() -> list[str]:
    return sorted(name for name in os.listdir("/dev") if name.startswith(".ptxkit"))


@pytest.mark.ptxas
def test_assemble_to_dev_null_as_another_user(as_nobody, shared_folder):
    source = shared_folder / "k.ptx"
    source.write_text(VECTOR_ADD.read_text())
    source.chmod(0o644)
    before = _dev_leftovers()
    code, err = as_nobody(["assemble", str(source), "-o", "/dev/null", "--no-cache"], shared_folder)
    assert (code, err) == (0, "")
    assert _dev_leftovers() == before
    assert os.listdir(shared_folder) == ["k.ptx"]


def test_a_read_only_folder_as_another_user(as_nobody, shared_folder):
    """A new file there is refused, naming the path given; an existing file the user may
    write is rewritten in place (hard links, mode and owner kept), no temporary file made."""
    source = shared_folder / "k.ptx"
    source.write_text(IF_HOIST.read_text())
    source.chmod(0o644)
    locked = shared_folder / "ro"
    locked.mkdir()
    existing = locked / "old.ptx"
    existing.write_text("old\n")
    existing.chmod(0o666)
    locked.chmod(0o755)  # nobody may not create files in it
    refused = as_nobody(["fence", str(source), "-o", "ro/new.ptx"], shared_folder)
    assert refused == (2, "ptxkit: error: cannot write ro/new.ptx: Permission denied\n")
    assert os.listdir(locked) == ["old.ptx"]
    assert as_nobody(["fence", str(source), "-o", "ro/old.ptx"], shared_folder) == (0, "")
    assert "fence.proxy.async" in existing.read_text() and os.listdir(locked) == ["old.ptx"]
    assert existing.stat().st_uid == 0 and mode_of(existing) == 0o666
    mine = shared_folder / "mine.ptx"  # nobody's own input in a folder nobody may not write: -i
    mine.write_text(IF_HOIST.read_text())
    os.chown(mine, 65534, 65534)
    assert as_nobody(["fence", "-i", "mine.ptx"], shared_folder) == (0, "")
    assert "fence.proxy.async" in mine.read_text()
    assert sorted(os.listdir(shared_folder)) == ["k.ptx", "mine.ptx", "ro"]
