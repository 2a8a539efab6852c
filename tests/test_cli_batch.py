"""``ptxkit.cli.batch``: inputs, order of results, progress on a terminal, exit codes."""

from __future__ import annotations

import argparse
import gc
import io
import os

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


def test_jobs_default_to_what_the_batch_is_worth(capsys):
    parser = argparse.ArgumentParser()
    batch.add_arguments(parser)
    assert parser.parse_args([]).jobs == 0 and parser.parse_args(["-j", "0"]).jobs == 0
    assert parser.parse_args(["-j", "3"]).jobs == 3
    status, results = batch.run_files(work, ["a", "b", "c"], argparse.Namespace(jobs=0))
    assert status == EXIT_OK and [r.name for r in results] == ["a", "b", "c"]
    with pytest.raises(SystemExit):
        parser.parse_args(["-j", "many"])


FENCE = batch.FENCE_COST


def test_a_small_batch_stays_in_one_process():
    """Files whose checks cost less than the workers would save (two workers save half the
    work and cost 2 * WORKER_START)."""
    assert batch.plan_jobs([2_000] * 2, FENCE, cpus=2, busy=0) == 1
    assert batch.plan_jobs([1_200] * 50, FENCE, cpus=2, busy=0) == 1
    assert batch.plan_jobs([1_200] * 50, FENCE, cpus=64, busy=0) == 1
    assert batch.plan_jobs([10**7], FENCE, cpus=2, busy=0) == 1  # one file: nothing to share


def test_a_big_batch_takes_the_cpus_it_is_worth():
    assert batch.plan_jobs([2_200] * 174, FENCE, cpus=2, busy=0) == 2  # samples/fence
    assert batch.plan_jobs([2 * 10**6] * 3, FENCE, cpus=2, busy=0) == 2
    assert batch.plan_jobs([2 * 10**6] * 3, FENCE, cpus=64, busy=0) == 3  # no more processes than files
    many = batch.plan_jobs([10**6] * 400, FENCE, cpus=64, busy=0)  # 180 s of checks: all 64
    assert many == 64
    assert 4 <= batch.plan_jobs([10**5] * 100, FENCE, cpus=64, busy=0) < 64  # 4.6 s: about sqrt(4.6 / 0.03)


def test_cores_other_tasks_keep_busy_bring_nothing():
    assert batch.plan_jobs([2 * 10**6] * 3, FENCE, cpus=2, busy=1) == 1
    assert batch.plan_jobs([2 * 10**6] * 8, FENCE, cpus=8, busy=5) == 3
    assert batch.plan_jobs([2 * 10**6] * 8, FENCE, cpus=8, busy=20) == 1


def test_the_dearest_file_bounds_what_workers_save():
    """One large file and a few small ones: the large one takes as long in any process."""
    assert batch.plan_jobs([8 * 10**6, 2_000, 2_000], FENCE, cpus=2, busy=0) == 1
    assert batch.plan_jobs([8 * 10**6, 8 * 10**6], FENCE, cpus=2, busy=0) == 2


def test_the_decision_turns_where_the_model_says():
    """Two processes pay 2 * WORKER_START to halve the work: worth it once the work is
    more than 4 * WORKER_START."""
    def batch_of(seconds):  # 100 equal files that cost `seconds` in all
        return [int((seconds / 100 - FENCE.per_file) / FENCE.per_mb * 1e6)] * 100

    assert batch.plan_jobs(batch_of(3.9 * batch.WORKER_START), FENCE, cpus=2, busy=0) == 1
    assert batch.plan_jobs(batch_of(4.1 * batch.WORKER_START), FENCE, cpus=2, busy=0) == 2


def test_an_explicit_count_is_honoured_up_to_the_cpus_and_files():
    assert batch.plan_jobs([1_200] * 50, FENCE, jobs=2, cpus=2, busy=0) == 2
    assert batch.plan_jobs([1_200] * 50, FENCE, jobs=8, cpus=2, busy=1) == 2
    assert batch.plan_jobs([1_200] * 3, FENCE, jobs=8, cpus=64, busy=0) == 3
    assert batch.plan_jobs([2 * 10**6] * 3, FENCE, jobs=1, cpus=2, busy=0) == 1


def test_busy_cpus_reads_the_runnable_tasks(monkeypatch):
    import builtins

    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO("7.66 6.41 4.43 8/169 6829\n")
                        if path == "/proc/loadavg" else real_open(path, *a, **k))
    assert batch._busy_cpus() == 7  # eight runnable, this process among them
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: (_ for _ in ()).throw(FileNotFoundError(path)))
    assert batch._busy_cpus() == 0


def pid_work(path: str, args) -> batch.FileResult:
    """A worker that says which process ran it."""
    return batch.FileResult(path, EXIT_OK, stdout=f"{os.path.basename(path)} {os.getpid()}\n")


def _sized_files(tmp_path, count: int, size: int) -> list[str]:
    files = []
    for i in range(count):
        path = tmp_path / f"k{i}.ptx"
        with open(path, "wb") as handle:
            handle.truncate(size)  # sparse: its size without writing it
        files.append(str(path))
    return files


@pytest.mark.parametrize("size, processes", [(2_000, 1), (4 * 10**6, 2)])
def test_run_files_plans_from_the_files_sizes(size, processes, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(batch, "_cpus", lambda: 2)
    monkeypatch.setattr(batch, "_busy_cpus", lambda: 0)
    files = _sized_files(tmp_path, 6, size)
    status, results = batch.run_files(pid_work, files, argparse.Namespace(jobs=0), cost=FENCE)
    names_and_pids = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert status == EXIT_OK and [name for name, _ in names_and_pids] == [f"k{i}.ptx" for i in range(6)]
    pids = {pid for _, pid in names_and_pids}
    assert (pids == {str(os.getpid())}) if processes == 1 else (str(os.getpid()) not in pids and len(pids) >= 1)


@pytest.mark.parametrize("command", [["fence", "--check"], ["parse"]])
def test_output_is_the_same_in_any_number_of_processes(command, monkeypatch, capsys):
    """samples/fence in one process (asked, and by default with every core busy) and in two
    (asked, and by default on two idle cores): the same bytes, the same status."""
    from ptxkit.cli.main import main

    monkeypatch.setattr(batch, "_cpus", lambda: 2)
    chosen = []
    planned = batch.plan_jobs
    monkeypatch.setattr(batch, "plan_jobs", lambda *a, **k: chosen.append(planned(*a, **k)) or chosen[-1])
    runs = []
    for jobs, busy in ((["-j", "1"], 0), ([], 2), (["-j", "2"], 0), ([], 0)):
        monkeypatch.setattr(batch, "_busy_cpus", lambda: busy)
        status = main([*command, *jobs, "samples/fence"])
        out, err = capsys.readouterr()
        runs.append((status, out, err))
    assert chosen == [1, 1, 2, 2 if command[0] == "fence" else 1]  # parsing 174 small files is not worth two
    assert runs[0][0] == (1 if command[-1] == "--check" else 0) and len(runs[0][1] + runs[0][2]) > 1000
    assert runs[1:] == [runs[0]] * 3


@pytest.mark.parametrize("command", [["fence", "--check"], ["fence", "--diff"], ["parse"],
                                     ["rewrite", "--pass", "strip-fences", "--format", "json"]])
def test_a_batch_leaves_the_collector_nothing(command, monkeypatch, capsys):
    """Each file's module is released when its command is done with it (`Module.release`),
    and the fence pass makes no cycle: with the cyclic collector off, the files of a batch
    in one process leave nothing for it, so a long batch's memory stays at its largest
    file's with no collection. (What the command line builds around them, its argument
    parser, is collected before the files start.)"""
    from ptxkit.cli.main import main

    files = ["samples/fence/h08a_stage_ring_handoff.ptx", "samples/fence/x16_created_preheader.ptx",
             "samples/fence/h15a_rounded_up_base_separate_buffers.ptx", "samples/toolchain/vector_add.ptx"]
    main([*command, "-j", "1", *files])  # what a first run imports and caches
    real, collected = batch.run_files, []

    def without_the_collector(*args, **kwargs):
        gc.collect()
        gc.disable()
        try:
            return real(*args, **kwargs)
        finally:
            collected.append(gc.collect())
            gc.enable()

    monkeypatch.setattr(batch, "run_files", without_the_collector)
    status = main([*command, "-j", "1", *files])
    out, err = capsys.readouterr()
    assert status in (EXIT_OK, EXIT_FINDINGS) and len(out + err) > 100
    assert collected == [0]
