"""``ptxkit.cli.batch``: inputs, order of results, progress on a terminal, exit codes."""

from __future__ import annotations

import argparse
import gc
import io
import weakref

import pytest

from ptxkit.cli import batch
from ptxkit.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK, UsageError


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def work(path: str, args) -> batch.FileResult:
    """A worker whose result depends on the file name only."""
    if path.startswith("bad"):
        raise UsageError(f"{path}: unreadable")
    status = EXIT_FINDINGS if "finding" in path else EXIT_OK
    return batch.FileResult(path, status, stdout=f"{path}\n", count=int(status == EXIT_FINDINGS))


def test_results_come_in_input_order_with_the_worst_status(capsys):
    files = [f"file{i}" for i in range(7)] + ["finding", "bad1"]
    status, results = batch.run_files(work, files, argparse.Namespace(jobs=3),
                                      summary=lambda rs: f"{len(rs)} done")
    out, err = capsys.readouterr()
    assert status == EXIT_BAD_INPUT and [r.name for r in results] == files
    assert out.splitlines() == files[:-1]
    assert err == "ptxkit: error: bad1: unreadable\n9 done\n"


def test_progress_shows_on_a_terminal_and_is_cleared(monkeypatch, capsys):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr(batch, "PROGRESS_AFTER", 0.0)
    status, _ = batch.run_files(work, ["a", "finding", "c"], argparse.Namespace(jobs=1))
    shown = terminal.getvalue()
    assert status == EXIT_FINDINGS
    assert "\r\x1b[K[1/3] a" in shown and "\r\x1b[K[2/3] finding" in shown
    assert shown.endswith("\r\x1b[K")  # the last line is cleared
    assert capsys.readouterr().out == "a\nfinding\nc\n"


def test_no_progress_when_not_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(batch, "PROGRESS_AFTER", 0.0)
    batch.run_files(work, ["a", "b"], argparse.Namespace(jobs=1))
    assert "\x1b" not in capsys.readouterr().err


def test_jobs_zero_means_one_process_per_cpu(capsys):
    parser = argparse.ArgumentParser()
    batch.add_arguments(parser)
    assert parser.parse_args(["-j", "0"]).jobs == 0
    status, results = batch.run_files(work, ["a", "b", "c"], argparse.Namespace(jobs=0))
    assert status == EXIT_OK and [r.name for r in results] == ["a", "b", "c"]
    with pytest.raises(SystemExit):
        parser.parse_args(["-j", "many"])


class Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self):
        self.me = self


#: Weak references to the cycles `cyclic_work` left, in this process.
_left = []


def cyclic_work(path: str, args) -> batch.FileResult:
    """A worker that leaves a reference cycle behind; its count: how many earlier ones live."""
    still = sum(ref() is not None for ref in _left)
    _left.append(weakref.ref(Cycle()))
    return batch.FileResult(path, EXIT_OK, count=still)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_batch_collects_the_cycles_its_files_left(jobs, monkeypatch, tmp_path):
    # with the collector off, as the fence pass keeps it while building (ptxkit._gc), what a
    # file left in reference cycles is gone when the next file in the same process starts,
    # once the files checked add up to COLLECT_AFTER bytes (here every file; 6 files in 2
    # workers: one of them runs at least 3)
    monkeypatch.setattr(batch, "COLLECT_AFTER", 1)
    monkeypatch.setattr(batch, "_worker_garbage", batch._Garbage())
    files = []
    for i in range(6):
        files.append(str(tmp_path / f"k{i}.ptx"))
        (tmp_path / f"k{i}.ptx").write_text("// a kernel\n")
    _left.clear()
    gc.disable()
    try:
        status, results = batch.run_files(cyclic_work, files, argparse.Namespace(jobs=jobs))
    finally:
        gc.enable()
    assert status == EXIT_OK and [result.count for result in results] == [0] * 6


def test_a_small_batch_leaves_the_collector_alone(monkeypatch, tmp_path):
    # below COLLECT_AFTER bytes nothing is collected: a batch of small files pays nothing
    collected = []
    monkeypatch.setattr(gc, "collect", lambda *args: collected.append(args) or 0)
    files = [str(tmp_path / "a.ptx"), str(tmp_path / "b.ptx")]
    for path in files:
        open(path, "w").write("// a kernel\n")
    status, _ = batch.run_files(cyclic_work, files, argparse.Namespace(jobs=1))
    assert status == EXIT_OK and collected == []
