"""One command over many PTX files: the inputs, worker processes, progress and the summary.

A command gives a worker ``work(path, args) -> FileResult`` that handles one file and
returns what to print instead of printing it; `run_files` runs it over the inputs, in
worker processes when the batch is worth them (`plan_jobs`) or ``-j N`` asks, and prints
each file's output in input order, so the output of ``-j 8`` is the output of ``-j 1``.
The exit code is the worst result: 2 when a file could not be read as PTX, else 1 when a
file has findings, else 0.

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
    """``-j N``: how many worker processes check files at once (default: `plan_jobs`).

    >>> import argparse
    >>> parser = argparse.ArgumentParser(); add_arguments(parser)
    >>> parser.parse_args(["-j", "4"]).jobs, parser.parse_args([]).jobs
    (4, 0)
    """
    parser.add_argument("-j", "--jobs", type=_jobs, default=0, metavar="N",
                        help="check files in N processes at once, at most one per CPU and per file (1: in this "
                             "process alone); default 0: as many as the batch is worth, one for a batch that one "
                             "process finishes sooner, at most one per CPU no other task keeps busy")


class Cost:
    """What a command's work on one file costs, in seconds: `per_file` plus `per_mb` for
    each MB (10^6 bytes) of PTX. `plan_jobs` estimates a batch with it.

    >>> Cost(0.001, 0.5).of(2_000_000)
    1.001
    """

    __slots__ = ("per_file", "per_mb")

    def __init__(self, per_file: float, per_mb: float):
        self.per_file, self.per_mb = per_file, per_mb

    def of(self, size: int) -> float:
        return self.per_file + self.per_mb * size / 1e6


#: The wall time each worker process costs a batch: forking it, the pool's machinery, the
#: imports the work needs, feeding it and joining it (two workers cost 40-70 ms more than
#: one process on the development machine: README, "Batches"; benchmarks/batch_bench.py).
WORKER_START = 0.03


def plan_jobs(sizes: list[int], cost: Cost, jobs: int = 0, cpus: int | None = None,
              busy: int | None = None) -> int:
    """How many processes check files of these `sizes` (bytes).

    `jobs` given: that many, at most one per CPU and per file. Else (``jobs == 0``) the
    count that finishes soonest by this model: each file costs `cost`; one process takes
    the batch's total; `n` processes take the larger of 1/n of it and the dearest file,
    plus `WORKER_START` each, and gain only on the CPUs that no other task keeps `busy`
    now (default: `_busy_cpus`; the scheduler shares a busy core, so a worker there
    brings nothing but its start). A batch one process finishes sooner stays in it (1).

    >>> fence = FENCE_COST
    >>> plan_jobs([1_200] * 50, fence, cpus=2, busy=0)            # 50 small files: 0.09 s of checks
    1
    >>> plan_jobs([2_200] * 174, fence, cpus=2, busy=0)           # 174 (samples/fence): 0.38 s
    2
    >>> plan_jobs([2_200] * 174, fence, cpus=2, busy=1)           # ... with a core in other use
    1
    >>> plan_jobs([2_200] * 174, fence, jobs=8, cpus=2, busy=1), plan_jobs([9] * 3, fence, jobs=1, cpus=2)
    (2, 1)
    """
    cpus = cpus or _cpus()
    most = min(jobs or cpus, cpus, len(sizes))
    if jobs or most <= 1:
        return max(1, most)
    free = min(most, cpus - (_busy_cpus() if busy is None else busy))
    if free <= 1:
        return 1
    costs = [cost.of(size) for size in sizes]
    total, dearest = sum(costs), max(costs)
    best, best_time = 1, total
    for n in range(2, free + 1):
        finish = max(total / n, dearest) + WORKER_START * n
        if finish < best_time:
            best, best_time = n, finish
    return best


#: What checking a file costs ``ptxkit fence`` and ``ptxkit parse`` in one process on the
#: development machine (in-process medians over real kernels and samples/fence: README,
#: "Batches"); a command that gives no cost is taken to cost what ``fence`` does.
FENCE_COST = Cost(0.0012, 0.45)
PARSE_COST = Cost(0.0003, 0.07)


def expand_inputs(paths: list[str], excludes=()) -> list[str]:
    """The input files: files (and ``-``) as given, folders walked for ``*.ptx`` in sorted
    order, leaving out hidden folders, build output and what git ignores, less what the
    `excludes` (`ptxkit.cli.inputs.Exclude`) match (`ptxkit.cli.inputs.expand`).

    >>> expand_inputs(["-", "samples/toolchain/empty.ptx"])
    ['-', 'samples/toolchain/empty.ptx']
    """
    from .inputs import expand

    try:
        files = expand(paths, excludes)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if files.count("-") > 1:
        raise UsageError("standard input (-) can be read only once")
    return files


def run_files(work, files: list[str], args, summary=None, error_output=None,
              cost: Cost | None = None) -> tuple[int, list[FileResult]]:
    """Run `work(path, args)` on every file (in ``args.jobs`` processes, or as many as
    `plan_jobs` finds the batch worth with the work's `cost`), printing each result's
    stdout and stderr in input order; then, for several files, the line
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
    jobs = plan_jobs([_size(path) for path in files], cost or FENCE_COST, getattr(args, "jobs", 0) or 0)
    for result in _results(work, files, args, jobs):
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


def _size(path: str) -> int:
    """The bytes of the file at `path` (0 for standard input or a file that is not there)."""
    try:
        return os.path.getsize(path) if path != "-" else 0
    except OSError:
        return 0


def _cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _busy_cpus() -> int:
    """The tasks other than this one that are running or ready to run now (Linux's
    ``/proc/loadavg``: its count of runnable tasks at this instant, not an average, less
    this process); 0 where that is not known."""
    try:
        with open("/proc/loadavg") as handle:
            runnable = int(handle.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, runnable - 1)


def _results(work, files: list[str], args, jobs: int):
    """The results of `work` over `files`, in order (in `jobs` worker processes when more than 1)."""
    if jobs <= 1:
        for path in files:
            yield guarded(work, path, args)
        return
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    chunk = max(1, len(files) // (jobs * 8))  # small chunks keep the order-preserving output flowing
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(partial(guarded, work, args=args), files, chunksize=chunk)


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
