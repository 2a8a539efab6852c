"""``ptxkit ptxas`` / ``ptxkit-ptxas``: a drop-in ptxas that fences its input first.

The wrapper is compared with the real ptxas run on the same arguments: exit status,
stdout, stderr (ptxas's timing line masked) and output files must be the same, except
that what gets assembled is the fenced PTX.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ptxkit.cli import ptxas_cmd
from ptxkit.cli.ptxas_cmd import input_files
from ptxkit.edits import LineMap

from conftest import environment_variables

ROOT = Path(__file__).resolve().parent.parent
HOPPER = ROOT / "samples" / "hopper"
NEEDS_FENCE = HOPPER / "gemm_store_once.ptx"  # one fence, hoisted before $mma_loop
NEEDS_NONE = HOPPER / "tma_wgmma_mainloop.ptx"
TIMING = re.compile(rb"ptxas info    : Compile time = [0-9.]+ ms\n")
WRAPPER = [sys.executable, "-m", "ptxkit.cli.ptxas_cmd"]
CLI = [sys.executable, "-m", "ptxkit", "ptxas"]


# -- pure helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["-lineinfo", "-v", "--gpu-name=sm_90a", "/tmp/k.ptx", "-o", "/tmp/k.ptx.o"], [3]),  # Triton
        (["-arch=sm_90a", "-m64", "x.compute_90a.ptx", "-o", "x.cubin"], [2]),  # nvcc
        (["-arch", "sm_90a", "-o", "out.ptx", "in.ptx"], [4]),  # -o's value is not an input
        (["--opt-level", "3", "-dlcm", "ca", "a.ptx", "b.ptx"], [4, 5]),
        (["--version"], []),
        (["-O3", "--maxrregcount=64", "k.ptx"], [2]),
    ],
)
def test_input_files(argv, expected):
    assert input_files(argv) == expected


def test_map_messages_renames_the_copy_and_shifts_its_lines():
    log = "ptxas /p/q/k.ptx, line 5; error   : bad\nptxas /p/q/k.ptx, line 2; warning : w\n"
    mapped = ptxas_cmd._map_messages(log, "/p/q/k.ptx", "src/k.ptx", LineMap([(2, 1)]))  # copy line 2 inserted
    assert mapped == "ptxas src/k.ptx, line 4; error   : bad\nptxas src/k.ptx, line 2; warning : w\n"


# -- finding the real ptxas ----------------------------------------------------------------


def _script(path: Path, body: str) -> Path:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.mark.ptxas
def test_real_ptxas_skips_a_wrapper_installed_as_ptxas(tmp_path, monkeypatch):
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = _script(shim_dir / "ptxas", f'#!/bin/sh\nexec {sys.executable} -m ptxkit ptxas "$@"\n')
    real = ptxas_cmd.real_ptxas()
    for variable in ("PTXAS", "CUDA_HOME", "CUDA_PATH", "PTXKIT_REAL_PTXAS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PATH", f"{shim_dir}{os.pathsep}{Path(real).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PTXAS", str(shim))  # even when $PTXAS names the wrapper
    found = ptxas_cmd.real_ptxas()
    assert Path(found).resolve() != shim.resolve()
    assert not ptxas_cmd._is_wrapper(found)
    done = subprocess.run([str(shim), "--version"], capture_output=True, timeout=120)
    assert done.returncode == 0 and b"Cuda compilation tools" in done.stdout


@pytest.mark.ptxas
def test_a_disguised_wrapper_stops_instead_of_recursing(tmp_path, monkeypatch):
    """A "ptxas" that runs the wrapper without saying so is caught by the environment
    guard: exit 255 with a message, not an endless chain of processes."""
    wrapper = _script(tmp_path / "w", f'#!/bin/sh\nexec {sys.executable} -m ptxkit.cli.ptxas_cmd "$@"\n')
    disguised = _script(tmp_path / "ptxas", '#!/bin/sh\nexec "$INNER" "$@"\n')
    monkeypatch.setenv("INNER", str(wrapper))
    monkeypatch.setenv("PTXKIT_REAL_PTXAS", str(disguised))
    done = subprocess.run(WRAPPER + ["--version"], capture_output=True, timeout=120)
    assert done.returncode == 255
    assert b"runs ptxkit-ptxas again" in done.stderr


def test_a_bad_mode_is_refused(monkeypatch):
    monkeypatch.setenv("PTXKIT_FENCE_MODE", "sometimes")
    done = subprocess.run(WRAPPER + ["--version"], capture_output=True, timeout=120)
    assert done.returncode == 255 and b"PTXKIT_FENCE_MODE must be one of fence, check, off" in done.stderr


# -- against the real ptxas ----------------------------------------------------------------


def run(command, cwd, **env) -> subprocess.CompletedProcess:
    environment = dict(os.environ, **env)
    return subprocess.run(command, cwd=cwd, capture_output=True, env=environment, timeout=300)


def same_output(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert a.returncode == b.returncode
    assert a.stdout == b.stdout
    assert TIMING.sub(b"", a.stderr) == TIMING.sub(b"", b.stderr)


@pytest.fixture
def real():
    return [ptxas_cmd.real_ptxas()]


@pytest.mark.ptxas
@pytest.mark.parametrize("front", [WRAPPER, CLI], ids=["ptxkit-ptxas", "ptxkit ptxas"])
@pytest.mark.parametrize("arguments", [["--version"], [], ["--no-such-option"]])
def test_passes_through_when_there_is_no_input(front, arguments, real, tmp_path):
    """Triton parses `ptxas --version`: it must be byte for byte ptxas's."""
    same_output(run(front + arguments, tmp_path), run(real + arguments, tmp_path))


@pytest.mark.ptxas
@pytest.mark.parametrize("front", [WRAPPER, CLI], ids=["ptxkit-ptxas", "ptxkit ptxas"])
@pytest.mark.parametrize("option", ["--help", "-h"])
def test_help_is_ptxas_help_then_the_wrappers(front, option, real, tmp_path):
    """ptxas's own help, then what the wrapper adds: its exit codes and every PTXKIT_*
    variable it reads."""
    mine, theirs = run(front + [option], tmp_path), run(real + [option], tmp_path)
    assert mine.returncode == theirs.returncode == 0 and mine.stderr == theirs.stderr
    assert mine.stdout.startswith(theirs.stdout)
    added = mine.stdout[len(theirs.stdout):].decode()
    assert added.startswith("\nptxkit-ptxas (also ptxkit ptxas) runs the ptxas above")
    from ptxkit import fencelog

    variables = environment_variables(Path(ptxas_cmd.__file__), Path(fencelog.__file__))
    assert {"PTXKIT_FENCE_MODE", "PTXKIT_FENCE_LOG", "PTXKIT_ON_ERROR", "PTXKIT_REAL_PTXAS"} <= variables
    assert [name for name in sorted(variables) if name not in added] == []
    assert re.search(r"^exit codes:\n  0 .*\n  255 ", added, re.MULTILINE) and "--ptxkit-on-error" in added


def test_help_without_a_ptxas_still_tells_the_wrappers_part(tmp_path):
    done = run(WRAPPER + ["--help"], tmp_path, PTXKIT_REAL_PTXAS=str(tmp_path / "no-ptxas"))
    assert done.returncode == 255 and b"is not NVIDIA's ptxas" in done.stderr
    assert b"PTXKIT_ON_ERROR" in done.stdout and b"exit codes:" in done.stdout


def _copy(source: Path, directory: Path, name: str = "k.ptx") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    target.write_bytes(source.read_bytes())
    return target


@pytest.mark.ptxas
@pytest.mark.parametrize("mode", ["fence", "check", "off"])
def test_input_needing_no_fence_is_ptxas_exactly(mode, real, tmp_path):
    _copy(NEEDS_NONE, tmp_path / "w")
    _copy(NEEDS_NONE, tmp_path / "p")
    arguments = ["-arch=sm_90a", "-v", "-lineinfo", "k.ptx", "-o", "k.cubin"]
    mine = run(WRAPPER + arguments, tmp_path / "w", PTXKIT_FENCE_MODE=mode)
    theirs = run(real + arguments, tmp_path / "p")
    same_output(mine, theirs)
    assert (tmp_path / "w" / "k.cubin").read_bytes() == (tmp_path / "p" / "k.cubin").read_bytes()


@pytest.mark.ptxas
def test_fenced_input_is_ptxas_on_the_fenced_text(real, tmp_path):
    """The wrapper assembles the fenced PTX; its output (cubin, messages) is what ptxas
    gives on that text under the caller's file name, and the caller's file is untouched."""
    from ptxkit.cfg.fence.fence import fence_text

    source = _copy(NEEDS_FENCE, tmp_path / "w")
    before = source.read_bytes(), source.stat().st_mtime_ns
    fenced, report = fence_text(NEEDS_FENCE.read_text(), filename="k.ptx")
    assert report.changed
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "k.ptx").write_text(fenced)
    arguments = ["-arch", "sm_90a", "-v", "k.ptx", "--output-file", "out.o"]
    mine = run(WRAPPER + arguments, tmp_path / "w")
    same_output(mine, run(real + arguments, tmp_path / "p"))
    assert (tmp_path / "w" / "out.o").read_bytes() == (tmp_path / "p" / "out.o").read_bytes()
    assert (source.read_bytes(), source.stat().st_mtime_ns) == before
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["k.ptx", "out.o"]
    plain = run(real + arguments, tmp_path / "w")  # ptxas on the unfenced file differs
    assert (tmp_path / "w" / "out.o").read_bytes() != (tmp_path / "p" / "out.o").read_bytes()
    assert plain.returncode == 0


@pytest.mark.ptxas
def test_errors_point_at_the_callers_file_and_lines(real, tmp_path):
    """ptxas errors after an inserted fence keep the caller's file name and line numbers."""
    text = NEEDS_FENCE.read_text().replace("\tret;\n}", "\tmov.u32 %q1, 5;\n\tret;\n}")
    assert "%q1" in text
    for side in ("w", "p"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "k.ptx").write_text(text)
    arguments = ["-arch=sm_90a", "./k.ptx", "-o", "k.o"]
    mine, theirs = run(WRAPPER + arguments, tmp_path / "w"), run(real + arguments, tmp_path / "p")
    assert theirs.returncode == 255 and b"./k.ptx, line" in theirs.stderr
    same_output(mine, theirs)
    assert not (tmp_path / "w" / "k.o").exists() and not (tmp_path / "p" / "k.o").exists()


@pytest.mark.ptxas
@pytest.mark.parametrize("content", [b"this is not PTX\n", None], ids=["garbage", "missing"])
def test_bad_input_gives_ptxas_answer(content, real, tmp_path):
    for side in ("w", "p"):
        (tmp_path / side).mkdir()
        if content is not None:
            (tmp_path / side / "k.ptx").write_bytes(content)
    arguments = ["-arch=sm_90a", "k.ptx", "-o", "k.o"]
    mine, theirs = run(WRAPPER + arguments, tmp_path / "w"), run(real + arguments, tmp_path / "p")
    assert theirs.returncode == 255
    same_output(mine, theirs)


@pytest.mark.ptxas
def test_check_mode_warns_and_assembles_the_input_as_it_is(real, tmp_path):
    _copy(NEEDS_FENCE, tmp_path / "w")
    _copy(NEEDS_FENCE, tmp_path / "p")
    arguments = ["-arch=sm_90a", "k.ptx", "-o", "k.o"]
    log = tmp_path / "fences.jsonl"
    mine = run(WRAPPER + arguments, tmp_path / "w", PTXKIT_FENCE_MODE="check", PTXKIT_FENCE_LOG=str(log))
    theirs = run(real + arguments, tmp_path / "p")
    assert mine.returncode == theirs.returncode == 0 and mine.stdout == theirs.stdout
    warnings = mine.stderr.decode().splitlines()
    assert len(warnings) == 1
    pattern = r"k\.ptx:(\d+):\d+: warning: missing fence\.proxy\.async\.shared::cta after this statement: .+ \[ptxkit\]"
    match = re.fullmatch(pattern, warnings[0])
    assert match, warnings[0]
    lines = NEEDS_FENCE.read_text().splitlines()
    assert lines[int(match.group(1))].strip() == "$mma_loop:"  # the hoisted place: the preheader's end
    assert (tmp_path / "w" / "k.o").read_bytes() == (tmp_path / "p" / "k.o").read_bytes()
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["mode"] == "check" and len(entry["fences"]) == 1
    assert entry["file"] == str(tmp_path / "w" / "k.ptx")


@pytest.mark.ptxas
def test_fence_log_lists_the_added_fences(real, tmp_path):
    _copy(NEEDS_FENCE, tmp_path, "a.ptx")
    _copy(NEEDS_NONE, tmp_path, "b.ptx")
    log = tmp_path / "fences.jsonl"
    for name in ("a.ptx", "b.ptx"):
        done = run(WRAPPER + ["-arch=sm_90a", name, "-o", name + ".o"], tmp_path, PTXKIT_FENCE_LOG=str(log))
        assert done.returncode == 0, done.stderr
    entries = {Path(e["file"]).name: e for e in map(json.loads, log.read_text().splitlines())}
    assert [f["variant"] for f in entries["a.ptx"]["fences"]] == ["fence.proxy.async.shared::cta"]
    assert entries["b.ptx"]["fences"] == [] and entries["a.ptx"]["mode"] == "fence"
    assert entries["a.ptx"]["kernels"] == ["gemm_store_once"] and entries["b.ptx"]["kernels"] == ["tma_wgmma_mainloop"]
    assert all(isinstance(f["line"], int) and f["reason"] for f in entries["a.ptx"]["fences"])


#: a kernel with no async-proxy opcode and no call: nothing in it can need a proxy fence
PLAIN = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry copy(.param .u64 p)\n{\n"
         ".reg .b64 %rd<3>;\n.reg .f32 %f<2>;\n\tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
         "\tld.global.f32 %f1, [%rd2];\n\tst.global.f32 [%rd2+4], %f1;\n\tret;\n}\n")


@pytest.mark.ptxas
def test_an_input_without_async_operations_skips_the_pass(real, tmp_path):
    for side in ("w", "p"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "k.ptx").write_text(PLAIN)
    arguments = ["-arch=sm_90a", "k.ptx", "-o", "k.o"]
    log = tmp_path / "fences.jsonl"
    mine = run(WRAPPER + arguments, tmp_path / "w", PTXKIT_FENCE_LOG=str(log))
    same_output(mine, run(real + arguments, tmp_path / "p"))
    assert (tmp_path / "w" / "k.o").read_bytes() == (tmp_path / "p" / "k.o").read_bytes()
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["fences"] == [] and entry["skipped"] == "no async-proxy operation or call"


# -- the nvcc recipe: nvcc -ptx, then the wrapper (or `ptxkit fence`) --------------------------

#: CUDA C++ that writes shared memory with ordinary stores and hands it to the async proxy
#: (a bulk copy to global) with no fence.proxy.async: nvcc leaves it unfenced.
CUDA_SOURCE = r"""
extern "C" __global__ void scale_copy(float* out, const float* in) {
  __shared__ alignas(128) float buf[256];
  buf[threadIdx.x] = in[threadIdx.x] * 2.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(buf));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 1024;" :: "l"(out), "r"(smem) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
}
"""


def _nvcc_ptx(directory: Path) -> Path:
    (directory / "k.cu").write_text(CUDA_SOURCE)
    done = subprocess.run(["nvcc", "-arch=sm_90a", "-ptx", "k.cu", "-o", "k.ptx"], cwd=directory,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return directory / "k.ptx"


@pytest.mark.nvcc
@pytest.mark.ptxas
def test_nvcc_ptx_gets_its_fence_through_the_wrapper(tmp_path):
    ptx = _nvcc_ptx(tmp_path)
    log = tmp_path / "fences.jsonl"
    done = run(WRAPPER + ["-arch=sm_90a", "k.ptx", "-o", "k.cubin"], tmp_path, PTXKIT_FENCE_LOG=str(log))
    assert done.returncode == 0, done.stderr
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert [f["variant"] for f in entry["fences"]] == ["fence.proxy.async.shared::cta"]
    lines = ptx.read_text().splitlines()
    bulk = next(i for i, line in enumerate(lines, 1) if "cp.async.bulk.global" in line)
    assert bar_sync_line(lines) < entry["fences"][0]["line"] <= bulk + 1
    assert "fence.proxy" not in ptx.read_text()  # the caller's PTX is untouched
    # The same through the other recipe: `ptxkit fence` writes the fenced PTX, ptxas assembles it.
    fenced = run([sys.executable, "-m", "ptxkit", "fence", "k.ptx", "-o", "k.fenced.ptx"], tmp_path)
    assert fenced.returncode == 0, fenced.stderr
    plain = run([ptxas_cmd.real_ptxas(), "-arch=sm_90a", "k.fenced.ptx", "-o", "k2.cubin"], tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert (tmp_path / "k.cubin").read_bytes() == (tmp_path / "k2.cubin").read_bytes()


def bar_sync_line(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith("bar.sync"))


@pytest.mark.nvcc
@pytest.mark.gpu
def test_nvcc_recipe_runs_on_the_gpu(tmp_path):
    import numpy as np

    from ptxkit import runtime

    _nvcc_ptx(tmp_path)
    done = run(WRAPPER + ["-arch=sm_90a", "k.ptx", "-o", "k.cubin"], tmp_path)
    assert done.returncode == 0, done.stderr
    kernel = runtime.load(str(tmp_path / "k.cubin")).kernel("scale_copy")
    data = np.random.default_rng(5).standard_normal(256).astype(np.float32)
    out = np.zeros(256, np.float32)
    kernel.launch(runtime.Out(out), data, grid=1, block=256)
    np.testing.assert_array_equal(out, 2 * data)


# -- ptxas started at once: its output kept when nothing needs a fence ----------------------------


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["k.ptx", "-o", "k.o"], (["k.ptx", "-o", "P"], "k.o")),
        (["k.ptx", "--output-file", "k.o"], (["k.ptx", "--output-file", "P"], "k.o")),
        (["-o=k.o", "k.ptx"], (["-o=P", "k.ptx"], "k.o")),
        (["--output-file=k.o", "k.ptx"], (["--output-file=P", "k.ptx"], "k.o")),
        (["-arch", "sm_90a", "k.ptx"], (["-arch", "sm_90a", "k.ptx", "-o", "P"], "elf.o")),
        (["-"], None),  # standard input: ptxas must read it itself
        (["--options-file", "opts.txt", "k.ptx"], None),  # the options file may name the output
        (["-optf=opts.txt", "k.ptx"], None),
        (["k.ptx", "-o", "a.o", "-o", "b.o"], None),
    ],
)
def test_redirect_output(argv, expected):
    assert ptxas_cmd.redirect_output(argv, "P") == expected


def _both(tmp_path, arguments, source=NEEDS_NONE, **env):
    for side in ("w", "p"):
        _copy(source, tmp_path / side)
    return (run(WRAPPER + arguments, tmp_path / "w", **env), run([ptxas_cmd.real_ptxas()] + arguments, tmp_path / "p"))


@pytest.mark.ptxas
@pytest.mark.parametrize("arguments", [["-arch=sm_90a", "k.ptx"], ["-arch=sm_90a", "k.ptx", "-o=out.cubin"],
                                       ["-arch=sm_90a", "--output-file=out.cubin", "k.ptx"]],
                         ids=["default elf.o", "-o=", "--output-file="])
def test_the_early_run_writes_what_ptxas_writes(arguments, tmp_path):
    mine, theirs = _both(tmp_path, arguments)
    same_output(mine, theirs)
    names = sorted(p.name for p in (tmp_path / "p").iterdir())
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == names and len(names) == 2
    output = next(name for name in names if name != "k.ptx")
    assert (tmp_path / "w" / output).read_bytes() == (tmp_path / "p" / output).read_bytes()


@pytest.mark.ptxas
def test_the_early_output_goes_through_links_and_keeps_an_existing_mode(tmp_path):
    for side in ("w", "p"):
        (tmp_path / side / "real").mkdir(parents=True)
        (tmp_path / side / "real" / "k.cubin").write_bytes(b"old")
        (tmp_path / side / "real" / "k.cubin").chmod(0o600)
        (tmp_path / side / "k.cubin").symlink_to(tmp_path / side / "real" / "k.cubin")
    mine, theirs = _both(tmp_path, ["-arch=sm_90a", "k.ptx", "-o", "k.cubin"])
    same_output(mine, theirs)
    for side in ("w", "p"):
        assert (tmp_path / side / "k.cubin").is_symlink()
        assert stat.S_IMODE((tmp_path / side / "real" / "k.cubin").stat().st_mode) == 0o600
    assert (tmp_path / "w" / "real" / "k.cubin").read_bytes() == (tmp_path / "p" / "real" / "k.cubin").read_bytes()


@pytest.mark.ptxas
@pytest.mark.parametrize("source", [NEEDS_NONE, NEEDS_FENCE], ids=["no fence needed", "fence needed"])
def test_an_output_that_cannot_be_written_is_ptxas_error(source, tmp_path):
    mine, theirs = _both(tmp_path, ["-arch=sm_90a", "k.ptx", "-o", "missing/k.o"], source=source)
    assert theirs.returncode == 255 and b"could not be opened" in theirs.stderr
    same_output(mine, theirs)


@pytest.mark.ptxas
def test_an_options_file_is_honoured(tmp_path):
    for side in ("w", "p"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "opts.txt").write_text("-arch=sm_90a -o from-options.o\n")
    mine, theirs = _both(tmp_path, ["--options-file", "opts.txt", "k.ptx"])
    same_output(mine, theirs)
    assert (tmp_path / "w" / "from-options.o").read_bytes() == (tmp_path / "p" / "from-options.o").read_bytes()


# -- fail closed: an input the fence pass cannot run on ------------------------------------------

#: Python that breaks the fence pass before the wrapper runs: PTX it cannot read (the parser
#: reports a syntax error at line 12, as it does for a construct it does not know) or a bug
#: (an exception inside the pass). The PTX itself stays valid, so ptxas accepts it.
BREAK_THE_PASS = {
    "unreadable": ("import ptxkit\nfrom ptxkit.errors import PtxSyntaxError\n"
                   "def parse(data, name='<input>'):\n"
                   "    raise PtxSyntaxError(\"unexpected operand '%3'\", name, 12, 5)\n"
                   "ptxkit.parse = parse\n"),
    "bug": ("import ptxkit.cfg.fence.fence\n"
            "def fence_module(*args, **kwargs):\n"
            "    raise RuntimeError('the pass broke')\n"
            "ptxkit.cfg.fence.fence.fence_module = fence_module\n"),
}
FAILURES = {
    "unreadable": ["ptxas k.ptx, line 12; error   : the proxy-fence pass cannot read this PTX: "
                   "unexpected operand '%3' (column 5) [ptxkit]"],
    "bug": ["RuntimeError: the pass broke",
            "ptxas error   : the proxy-fence pass failed on k.ptx (a bug in ptxkit; please report it): "
            "RuntimeError: the pass broke [ptxkit]"],
}
ABORTED = ("ptxas fatal   : Ptx assembly aborted: the proxy-fence pass could not run "
           "(PTXKIT_ON_ERROR=ptxas or --ptxkit-on-error=ptxas assembles without it) [ptxkit]")


def broken_wrapper(kind: str) -> list[str]:
    return [sys.executable, "-c", BREAK_THE_PASS[kind] + "import sys\nfrom ptxkit.cli.ptxas_cmd import main\n"
            "sys.exit(main(sys.argv[1:]))\n"]


@pytest.mark.ptxas
@pytest.mark.parametrize("kind", list(BREAK_THE_PASS))
@pytest.mark.parametrize("mode", ["fence", "check"])
@pytest.mark.parametrize("arguments", [["-arch=sm_90a", "k.ptx", "-o", "k.o"], ["--options-file", "opts.txt", "k.ptx"]],
                         ids=["-o", "options file"])
def test_an_input_the_pass_cannot_run_on_stops_the_build(kind, mode, arguments, tmp_path):
    """A ptxas error naming the input, exit 255 (ptxas's), no output file, and the log
    says why: the unfenced cubin is never written."""
    _copy(NEEDS_FENCE, tmp_path)
    (tmp_path / "opts.txt").write_text("-arch=sm_90a -o k.o\n")
    log = tmp_path / "fences.jsonl"
    done = run(broken_wrapper(kind) + arguments, tmp_path, PTXKIT_FENCE_MODE=mode, PTXKIT_FENCE_LOG=str(log))
    assert done.returncode == 255 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert lines[-1] == ABORTED
    assert lines[-2] == FAILURES[kind][-1]
    if kind == "bug":  # a bug shows its traceback, for the report
        assert lines[0] == "Traceback (most recent call last):" and FAILURES[kind][0] in lines
    else:
        assert len(lines) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fences.jsonl", "k.ptx", "opts.txt"]
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["fences"] == [] and entry["skipped"].startswith("the pass could not run: ")
    assert entry["kernels"] == ["gemm_store_once"]


@pytest.mark.ptxas
@pytest.mark.parametrize("kind", list(BREAK_THE_PASS))
@pytest.mark.parametrize("opt_out", ["environment", "argument"])
def test_opting_out_assembles_without_the_pass_and_warns(kind, opt_out, real, tmp_path):
    for side in ("w", "p"):
        _copy(NEEDS_FENCE, tmp_path / side)
    arguments = ["-arch=sm_90a", "k.ptx", "-o", "k.o"]
    if opt_out == "environment":
        mine = run(broken_wrapper(kind) + arguments, tmp_path / "w", PTXKIT_ON_ERROR="ptxas")
    else:  # the argument wins over the environment, and ptxas never sees it
        mine = run(broken_wrapper(kind) + ["--ptxkit-on-error=ptxas"] + arguments, tmp_path / "w",
                   PTXKIT_ON_ERROR="fail")
    theirs = run(real + arguments, tmp_path / "p")
    assert mine.returncode == theirs.returncode == 0 and mine.stdout == theirs.stdout
    warning = FAILURES[kind][-1].replace("error   :", "warning :").replace(
        " [ptxkit]", "; assembled without the pass (on error: ptxas) [ptxkit]")
    assert mine.stderr.decode().splitlines()[-1] == warning
    assert (tmp_path / "w" / "k.o").read_bytes() == (tmp_path / "p" / "k.o").read_bytes()  # the unfenced input's


@pytest.mark.ptxas
def test_when_ptxas_rejects_the_input_too_its_own_answer_wins(real, tmp_path):
    text = NEEDS_FENCE.read_text().replace("\tret;\n}", "\tmov.u32 %q1, 5;\n\tret;\n}")
    for side in ("w", "p"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "k.ptx").write_text(text)
    arguments = ["-arch=sm_90a", "k.ptx", "-o", "k.o"]
    mine, theirs = run(broken_wrapper("unreadable") + arguments, tmp_path / "w"), run(real + arguments, tmp_path / "p")
    assert theirs.returncode == 255 and b"%q1" in theirs.stderr
    same_output(mine, theirs)
    assert not (tmp_path / "w" / "k.o").exists()


@pytest.mark.parametrize("setting", [{"PTXKIT_ON_ERROR": "ignore"}, {}], ids=["environment", "argument"])
def test_a_bad_on_error_setting_is_refused(setting):
    arguments = ["--version"] if setting else ["--ptxkit-on-error=ignore", "--version"]
    done = run(WRAPPER + arguments, None, **setting)
    name = "PTXKIT_ON_ERROR" if setting else "--ptxkit-on-error"
    assert done.returncode == 255
    assert done.stderr.decode() == f"ptxkit-ptxas: error: {name} must be one of fail, ptxas (got 'ignore')\n"


# -- PTXKIT_PASSES ---------------------------------------------------------------------------

#: a user pass for the wrapper: a parameter for a buffer, a register written at every return
PASS_MODULE = '''
from ptxkit.rewrite import Plan

def stamp(module, bad=False):
    plan = Plan(module)
    for k in plan.kernels():
        buf = k.add_param(".u64", "buf")
        t = k.fresh_register(".u64", "t")
        k.insert(k.returns(), [f"ld.param.u64 {t}, [{buf.name}];"] + (["mov.u32 %undeclared, 0;"] if bad else []))
    return plan
'''


@pytest.mark.ptxas
def test_passes_run_before_the_fence_pass_and_are_logged(real, tmp_path, monkeypatch):
    """ptxas assembles what `ptxkit.rewrite.run` makes of the input (passes, then the
    fence pass); the log names the passes and the parameter they added."""
    from ptxkit.rewrite import run as rewrite

    (tmp_path / "stamps.py").write_text(PASS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = _copy(NEEDS_FENCE, tmp_path / "w")
    (tmp_path / "p").mkdir()
    result = rewrite(NEEDS_FENCE.read_text(), ["stamps:stamp"], filename="k.ptx")
    (tmp_path / "p" / "k.ptx").write_text(result.text)
    log = tmp_path / "log.jsonl"
    arguments = ["-arch=sm_90a", "k.ptx", "-o", "k.o"]
    mine = run(WRAPPER + arguments, tmp_path / "w", PTXKIT_PASSES="stamps:stamp", PTXKIT_FENCE_LOG=str(log),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    same_output(mine, run(real + arguments, tmp_path / "p"))
    assert (tmp_path / "w" / "k.o").read_bytes() == (tmp_path / "p" / "k.o").read_bytes()
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["passes"] == ["stamps:stamp"] and len(entry["fences"]) == 1
    ((kernel, (param,)),) = entry["params"].items()
    assert (param["name"], param["index"]) == ("ptxkit_buf", len(result.module.function(kernel).signature.params) - 1)
    assert source.read_text() == NEEDS_FENCE.read_text()  # the caller's file untouched


@pytest.mark.ptxas
def test_ptxas_errors_in_code_a_pass_inserted_point_at_the_callers_lines(tmp_path):
    (tmp_path / "stamps.py").write_text(PASS_MODULE)
    _copy(NEEDS_FENCE, tmp_path / "w")
    env = {"PTXKIT_PASSES": "stamps:stamp --bad", "PTXKIT_FENCE_MODE": "off",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    mine = run(WRAPPER + ["-arch=sm_90a", "k.ptx", "-o", "k.o"], tmp_path / "w", **env)
    assert mine.returncode == 255
    lines = [int(n) for n in re.findall(rb"k\.ptx, line (\d+);", mine.stderr)]
    text = NEEDS_FENCE.read_text().splitlines()
    assert lines and all(text[n - 1].strip() == "ret;" for n in lines)  # inserted before the ret


@pytest.mark.ptxas
def test_strip_fences_then_check_warns_at_the_input_lines(real, tmp_path):
    from ptxkit.cfg.fence.fence import fence_text

    fenced, _ = fence_text(NEEDS_FENCE.read_text(), "k.ptx")
    for side in ("w", "p"):
        (tmp_path / side).mkdir()
    (tmp_path / "w" / "k.ptx").write_text(fenced)
    (tmp_path / "p" / "k.ptx").write_text(NEEDS_FENCE.read_text())  # what stripping gives back
    arguments = ["-arch=sm_90a", "k.ptx", "-o", "k.o"]
    mine = run(WRAPPER + arguments, tmp_path / "w", PTXKIT_PASSES="strip-fences", PTXKIT_FENCE_MODE="check")
    theirs = run(real + arguments, tmp_path / "p")
    assert mine.returncode == theirs.returncode == 0
    (warning,) = [line for line in mine.stderr.decode().splitlines() if "[ptxkit]" in line]
    line = int(re.match(r"k\.ptx:(\d+):", warning).group(1))
    assert fenced.splitlines()[line - 1].strip() == NEEDS_FENCE.read_text().splitlines()[line - 1].strip()
    assert (tmp_path / "w" / "k.o").read_bytes() == (tmp_path / "p" / "k.o").read_bytes()


def test_a_bad_pass_spec_stops_the_build(tmp_path):
    _copy(NEEDS_FENCE, tmp_path)
    done = run(WRAPPER + ["-arch=sm_90a", "k.ptx", "-o", "k.o"], tmp_path, PTXKIT_PASSES="no-such-pass")
    assert done.returncode == 255 and b"PTXKIT_PASSES: pass 'no-such-pass'" in done.stderr
    assert not (tmp_path / "k.o").exists()


# -- standard input ------------------------------------------------------------------------------


@pytest.mark.ptxas
def test_standard_input_is_fenced_too(real, tmp_path):
    """``ptxas -`` reads the PTX from standard input: the wrapper reads it, fences it,
    and ptxas assembles the fenced copy (it used to get the input unfenced)."""
    from ptxkit.cfg.fence.fence import fence_text

    fenced, report = fence_text(NEEDS_FENCE.read_text(), filename="k.ptx")
    assert report.changed
    (tmp_path / "k.fenced.ptx").write_text(fenced)
    log = tmp_path / "fences.jsonl"
    with open(NEEDS_FENCE, "rb") as stdin:
        mine = subprocess.run(WRAPPER + ["-arch=sm_90a", "-", "-o", "mine.o"], stdin=stdin, cwd=tmp_path,
                              capture_output=True, timeout=300, env=dict(os.environ, PTXKIT_FENCE_LOG=str(log)))
    theirs = run(real + ["-arch=sm_90a", "k.fenced.ptx", "-o", "theirs.o"], tmp_path)
    assert mine.returncode == theirs.returncode == 0, mine.stderr
    assert (tmp_path / "mine.o").read_bytes() == (tmp_path / "theirs.o").read_bytes()
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["file"] == "<stdin>" and len(entry["fences"]) == 1 and entry["kernels"] == ["gemm_store_once"]


@pytest.mark.ptxas
@pytest.mark.parametrize("opt_out", [False, True], ids=["fail", "ptxas"])
def test_standard_input_the_pass_cannot_run_on(opt_out, real, tmp_path):
    environment = dict(os.environ, PTXKIT_ON_ERROR="ptxas" if opt_out else "fail")
    with open(NEEDS_FENCE, "rb") as stdin:
        mine = subprocess.run(broken_wrapper("unreadable") + ["-arch=sm_90a", "-", "-o", "k.o"], stdin=stdin,
                              cwd=tmp_path, capture_output=True, timeout=300, env=environment)
    problem = FAILURES["unreadable"][-1].replace("ptxas k.ptx,", "ptxas <stdin>,")
    lines = mine.stderr.decode().splitlines()
    if opt_out:  # assembled as it is, with a warning
        assert mine.returncode == 0 and (tmp_path / "k.o").exists()
        assert lines[-1] == problem.replace("error   :", "warning :").replace(
            " [ptxkit]", "; assembled without the pass (on error: ptxas) [ptxkit]")
        _copy(NEEDS_FENCE, tmp_path / "p")
        assert run(real + ["-arch=sm_90a", "k.ptx", "-o", "k.o"], tmp_path / "p").returncode == 0
        assert (tmp_path / "k.o").read_bytes() == (tmp_path / "p" / "k.o").read_bytes()
    else:
        assert mine.returncode == 255 and lines == [problem, ABORTED]
        assert not (tmp_path / "k.o").exists()


@pytest.mark.ptxas
def test_an_instrumented_build_leaves_its_layout_beside_the_output(tmp_path):
    """``PTXKIT_PASSES="timeline --buffer global"``: the cubin holds the kernel's buffer
    variable, and ``k.o.ptxkit.json`` the layout ``ptxkit trace`` reads; without an
    instrumentation pass no such file appears."""
    from ptxkit.cli.trace_cmd import load_layout
    from ptxkit.ptxas import kernel_names

    _copy(HOPPER / "ws_tma_pipeline.ptx", tmp_path)
    done = run(WRAPPER + ["-arch=sm_90a", "k.ptx", "-o", "k.o"], tmp_path,
               PTXKIT_PASSES="timeline --buffer global --capacity 128")
    assert done.returncode == 0, done.stderr
    layout = load_layout(str(tmp_path / "k.o.ptxkit.json"), None)
    assert (layout.kernel, layout.capacity) == ("ws_tma_pipeline", 128)
    assert layout.buffer == ("global", "ptxkit_trace_ws_tma_pipeline")
    data = (tmp_path / "k.o").read_bytes()
    assert kernel_names(data) == ["ws_tma_pipeline"] and b"ptxkit_trace_ws_tma_pipeline" in data
    done = run(WRAPPER + ["-arch=sm_90a", "k.ptx", "-o", "plain.o"], tmp_path, PTXKIT_PASSES="strip-fences")
    assert done.returncode == 0 and not (tmp_path / "plain.o.ptxkit.json").exists()
