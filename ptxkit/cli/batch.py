"""One command over many PTX files: the inputs, worker processes, progress and the summary.

A command gives a worker ``work(path, args) -> FileResult`` that handles one file and
returns what to print instead of printing it; `run_files` runs it over the inputs, in
``-j N`` worker processes when asked, and prints each file's output in input order, so
the output of ``-j 8`` is the output of ``-j 1``. The exit code is the worst result:
2 when a file could not be read as PTX, else 1 when a file has findings, else 0.

>>> import os
>>> inputs = expand_inputs(["samples/toolchain"])
>>> [os.path.basename(path) for path in inputs][:2]
['cluster_rank.ptx', 'dynamic_smem.ptx']
"""

from __future__ import annotations

import os
import sys
import time

from .common import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK, UsageError

#: Progress goes to a terminal only after this many seconds.
PROGRESS_AFTER = 1.0


class FileResult:
    """What one input gave: its exit status, the text for stdout and stderr, and data for
    a machine-readable format (a JSON report, SARIF results) plus a `count` of findings.

    >>> FileResult("k.ptx", EXIT_FINDINGS, stderr="k.ptx:3:1: error: …\\n", count=1).status
    1
    """

    __slots__ = ("name", "status", "stdout", "stderr", "data", "count")

    def __init__(self, name: str, status: int, stdout: str = "", stderr: str = "", data=None, count: int = 0):
        self.name = name
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.data = data
        self.count = count


def add_arguments(parser) -> None:
    """``-j N``: how many worker processes check files at once.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(); add_arguments(parser)
    >>> parser.parse_args(["-j", "4"]).jobs, parser.parse_args([]).jobs
    (4, 1)
    """
    parser.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                        help="check N files at once in worker processes (0: one per CPU; default 1)")


def expand_inputs(paths: list[str]) -> list[str]:
    """The input files: files (and ``-``) as given, directories walked for ``*.ptx`` in
    sorted order, skipping folders whose name starts with a dot (``.git``…).

    >>> expand_inputs(["-", "samples/toolchain/empty.ptx"])
    ['-', 'samples/toolchain/empty.ptx']
    """
    files = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            found = []
            for folder, subfolders, names in os.walk(path):
                subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
                found.extend(os.path.join(folder, name) for name in sorted(names) if name.endswith(".ptx"))
            if not found:
                raise UsageError(f"{path}: no .ptx files in this folder")
            files.extend(found)
        else:
            files.append(path)
    if files.count("-") > 1:
        raise UsageError("standard input (-) can be read only once")
    return files


def run_files(work, files: list[str], args, summary=None, error_output=None) -> tuple[int, list[FileResult]]:
    """Run `work(path, args)` on every file (``args.jobs`` processes), printing each
    result's stdout and stderr in input order; then, for several files, the line
    `summary(results)` on stderr. A file that is not PTX prints its error on stderr and
    `error_output(result)` on stdout when given. Returns (worst exit status, the results).

    >>> import argparse
    >>> def work(path, args): return FileResult(path, EXIT_OK, stdout=f"{path}: fine\\n")
    >>> run_files(work, ["a.ptx", "b.ptx"], argparse.Namespace(jobs=1))[0]
    a.ptx: fine
    b.ptx: fine
    0
    """
    progress = _Progress(len(files)) if len(files) > 1 and sys.stderr.isatty() else None
    results = []
    for result in _results(work, files, args):
        if progress is not None:
            progress.clear()
        if error_output is not None and result.status == EXIT_BAD_INPUT:
            result.stdout = error_output(result)
        _emit(result)
        results.append(result)
        if progress is not None:
            progress.show(len(results), result.name)
    if progress is not None:
        progress.clear()
    if summary is not None and len(files) > 1:
        print(summary(results), file=sys.stderr)
    sys.stdout.flush()
    return worst(results), results


def worst(results: list[FileResult]) -> int:
    """The exit status that says the worst result: bad input (2) over findings (1) over 0.

    >>> worst([FileResult("a", 1), FileResult("b", 2), FileResult("c", 0)]), worst([])
    (2, 0)
    """
    statuses = {result.status for result in results}
    for status in (EXIT_BAD_INPUT, EXIT_FINDINGS):
        if status in statuses:
            return status
    return EXIT_OK


def guarded(work, path: str, args) -> FileResult:
    """`work(path, args)`, with a bad file (unreadable, not PTX) turned into its error
    result (exit status 2) so that the other files still run.

    >>> def work(path, args): open(path)
    >>> result = guarded(work, "/nonexistent/k.ptx", None)
    >>> result.status, result.stderr
    (2, 'ptxkit: error: /nonexistent/k.ptx: No such file or directory\\n')
    """
    from ptxkit.errors import PtxSyntaxError

    try:
        return work(path, args)
    except PtxSyntaxError as err:
        return FileResult(path, EXIT_BAD_INPUT, stderr=err.format() + "\n", data=err.format().splitlines()[0])
    except (OSError, UsageError) as err:
        if isinstance(err, OSError):
            where = f"{err.filename}: " if err.filename else ""
            message = f"{where}{err.strerror or err}"
        else:
            message = str(err)
        return FileResult(path, EXIT_BAD_INPUT, stderr=f"ptxkit: error: {message}\n", data=message)


#: Bytes of PTX a process reads between two collections of what the files left (a file
#: leaves about 20 times its size: 61 MB of real kernels left 1.4 GB, `_Garbage`).
COLLECT_AFTER = 32 << 20


class _Garbage:
    """What the files a process checked left behind. A parsed module is full of reference
    cycles (nodes and their parents), and the fence pass moves what it builds straight to
    the collector's oldest generation (`ptxkit._gc.paused_gc`), whose full collections a
    batch of files alone would rarely trigger: 40 real kernels (61 MB) checked in one
    process reached 1.4 GB. Once the files since the last collection add up to
    `COLLECT_AFTER` bytes, their garbage is collected, so a batch's memory stays bounded
    (535 MB for those 40; 350 MB collecting after every file). Collecting costs about a
    fifth of the time the checks took (measured on those 40), so a batch smaller than
    `COLLECT_AFTER` pays nothing for it.

    >>> import gc, weakref
    >>> class Node: pass
    >>> node = Node(); node.me = node; kept = weakref.ref(node)
    >>> gc.disable(); del node
    >>> garbage = _Garbage(); garbage.left_by("samples/toolchain/empty.ptx", limit=0); gc.enable()
    >>> kept() is None, garbage.pending
    (True, 0)
    """

    def __init__(self):
        self.pending = 0

    def left_by(self, path: str, limit: int | None = None) -> None:
        """Count the file at `path` as checked; collect once the count reaches `limit`
        (default `COLLECT_AFTER`)."""
        try:
            self.pending += os.path.getsize(path)
        except OSError:  # standard input, or a file that went away
            pass
        if self.pending >= (COLLECT_AFTER if limit is None else limit):
            import gc

            gc.collect()
            self.pending = 0


def _results(work, files: list[str], args):
    """The results of `work` over `files`, in order (in worker processes for ``-j``)."""
    jobs = getattr(args, "jobs", 1) or os.cpu_count() or 1
    jobs = min(jobs, len(files))
    if jobs <= 1:
        garbage = _Garbage()
        for path in files:
            yield guarded(work, path, args)
            garbage.left_by(path)
        return
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    chunk = max(1, len(files) // (jobs * 8))  # small chunks keep the order-preserving output flowing
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(partial(_in_worker, work, args=args), files, chunksize=chunk)


#: What the files a worker process checked left (it checks several, one after another).
_worker_garbage = _Garbage()


def _in_worker(work, path: str, args) -> FileResult:
    """`guarded` in a worker process, then `_Garbage.left_by`."""
    result = guarded(work, path, args)
    _worker_garbage.left_by(path)
    return result


def _emit(result: FileResult) -> None:
    if result.stderr:
        sys.stderr.write(result.stderr)
        sys.stderr.flush()
    if result.stdout:
        sys.stdout.write(result.stdout)


class _Progress:
    """``[12/300] path`` on one terminal line of stderr, once a run takes longer than
    `PROGRESS_AFTER` seconds; `clear` removes it before other output."""

    def __init__(self, total: int):
        self.total = total
        self.start = time.monotonic()
        self.shown = False

    def show(self, done: int, name: str) -> None:
        if done < self.total and time.monotonic() - self.start >= PROGRESS_AFTER:
            sys.stderr.write(f"\r\x1b[K[{done}/{self.total}] {name}")
            sys.stderr.flush()
            self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def _jobs(value: str) -> int:
    import argparse

    try:
        jobs = int(value)
    except ValueError:
        jobs = -1
    if jobs < 0:
        raise argparse.ArgumentTypeError(f"expected a number of processes >= 0, got {value!r}")
    return jobs
