"""ptxkit.ptxas: finding ptxas, running it, its diagnostics and resource usage.

Tests that run the real ptxas carry the marker ``ptxas``; the lookup order, timeouts and
crashes are pinned with small fake ``ptxas`` scripts (POSIX only).
"""

from __future__ import annotations

import os
import sys
import textwrap
import types
from pathlib import Path

import pytest

import ptxkit
from ptxkit.isa import parse_target
from ptxkit.ptxas import (
    Diagnostic,
    PtxasError,
    PtxasNotFound,
    ResourceUsage,
    assemble,
    check_arch,
    find_ptxas,
    kernel_names,
    parse_diagnostics,
    parse_resources,
    render_log,
)

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "toolchain"
SAMPLE_KERNELS = {
    "vector_add": "vector_add",
    "transpose_scale": "transpose_scale",
    "cluster_rank": "cluster_rank",
    "dynamic_smem": "smem_reverse",
    "tma_load": "tma_load",
    "empty": "empty",
}
ARCHS = ["sm_80", "sm_90", "sm_90a", "sm_100a"]
posix_only = pytest.mark.skipif(os.name == "nt", reason="fake ptxas scripts are shell scripts")

BROKEN = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry broken()
{
	.reg .b32 %r<3>;
	mov.u32 %r1, %r9;
	bogus.u32 %r1, %r2;
	ret;
}
"""

WARNS = """\
.version 8.0
.target sm_80
.address_size 64

.visible .entry lonely() .minnctapersm 4
{
	ret;
}
"""

LOG_13 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'first' for 'sm_90a'
ptxas info    : Function properties for first
    64 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 64 bytes cumulative stack size, 2048 bytes smem
ptxas info    : Compile time = 2.514 ms
ptxas info    : Compiling entry function 'second' for 'sm_90a'
ptxas info    : Function properties for second
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers, used 0 barriers
ptxas info    : Function properties for helper
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own cubin cache, so results never leak between tests."""
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path / "cache"))


# --- parsing ptxas output (no ptxas needed) ----------------------------------------------


def test_resources_are_read_per_entry_and_device_functions_are_left_out():
    resources = parse_resources(LOG_13)
    assert resources == {
        "first": ResourceUsage(registers=40, shared_bytes=2048, stack_frame=64, spill_stores=8, spill_loads=12),
        "second": ResourceUsage(registers=4, shared_bytes=0, stack_frame=0, spill_stores=0, spill_loads=0),
    }


def test_resources_of_the_older_ptxas_format():
    log = (
        "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
        "ptxas info    : Function properties for k\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 10 registers, 356 bytes cmem[0], 512 bytes smem\n"
    )
    assert parse_resources(log)["k"] == ResourceUsage(registers=10, shared_bytes=512)


def test_diagnostics_keep_severity_and_line_and_use_the_callers_name():
    log = (
        "ptxas input.ptx, line 12; error   : Unknown symbol 'x'\n"
        "ptxas input.ptx, line 7; warning : .minnctapersm is ignored\n"
        "ptxas warning : Pragma 'foo' unsupported\n"
        "ptxas info    : Used 4 registers\n"
        "ptxas fatal   : Ptx assembly aborted due to errors\n"
    )
    assert parse_diagnostics(log, "dir/k.ptx") == [
        Diagnostic("dir/k.ptx", 12, "error", "Unknown symbol 'x'"),
        Diagnostic("dir/k.ptx", 7, "warning", ".minnctapersm is ignored"),
        Diagnostic("dir/k.ptx", None, "warning", "Pragma 'foo' unsupported"),
        Diagnostic("dir/k.ptx", None, "error", "Ptx assembly aborted due to errors"),
    ]


def test_diagnostic_format_is_gnu_style():
    assert Diagnostic("k.ptx", 3, "error", "boom").format() == "k.ptx:3:1: error: boom [ptxas]"
    assert Diagnostic("k.ptx", None, "warning", "hm").format() == "k.ptx: warning: hm [ptxas]"


def test_rendered_log_rewrites_messages_and_keeps_info_lines():
    log = "ptxas input.ptx, line 2; warning : odd\nptxas info    : Used 4 registers\n"
    assert render_log(log, "k.ptx") == "k.ptx:2:1: warning: odd [ptxas]\nptxas info    : Used 4 registers\n"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100f", "sm_120"])
def test_real_targets_are_accepted(arch):
    assert check_arch(arch) == arch


@pytest.mark.parametrize("arch", ["sm90", "compute_90", "sm_90x", "-o", "", None, 90])
def test_other_targets_are_rejected(arch):
    with pytest.raises(ValueError, match="arch"):
        check_arch(arch)


def test_kernel_names_refuses_what_is_not_an_elf_file():
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        kernel_names(b".version 8.0\n")


# --- finding ptxas (fake binaries) ------------------------------------------------------


def fake_ptxas(directory: Path, release: str = "12.4", body: str = "exit 0") -> Path:
    """A script that answers ``--version`` like ptxas of `release` and runs `body` otherwise."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ptxas"
    path.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "--version" ]; then
          echo "ptxas: NVIDIA (R) Ptx optimizing assembler"
          echo "Cuda compilation tools, release {release}, V{release}.99"
          exit 0
        fi
        {body}
        """))
    path.chmod(0o755)
    return path


@pytest.fixture
def no_ptxas(monkeypatch, tmp_path):
    """An environment where no ptxas can be found by any route."""
    for variable in ("PTXAS", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)  # import fails: "not installed"
    return monkeypatch


@posix_only
def test_nothing_found_says_where_it_looked_and_how_to_get_ptxas(no_ptxas):
    with pytest.raises(PtxasNotFound) as caught:
        find_ptxas()
    message = str(caught.value)
    for place in ("$PTXAS (not set)", "$CUDA_HOME/bin (not set)", "$CUDA_PATH/bin (not set)", "PATH",
                  "cuda.pathfinder (not installed)", 'pip install "ptxkit[toolkit]"', "CUDA toolkit"):
        assert place in message
    assert isinstance(caught.value, FileNotFoundError)


@posix_only
def test_lookup_order_ptxas_then_cuda_home_then_cuda_path_then_path(no_ptxas, tmp_path):
    on_path = fake_ptxas(tmp_path / "path-bin", "11.8")
    no_ptxas.setenv("PATH", str(on_path.parent))
    assert find_ptxas().path == str(on_path)
    cuda_path = fake_ptxas(tmp_path / "cuda-path" / "bin", "12.2")
    no_ptxas.setenv("CUDA_PATH", str(cuda_path.parent.parent))
    assert find_ptxas().path == str(cuda_path)
    cuda_home = fake_ptxas(tmp_path / "cuda-home" / "bin", "12.4")
    no_ptxas.setenv("CUDA_HOME", str(cuda_home.parent.parent))
    found = find_ptxas()
    assert (found.path, found.version, found.full_version) == (str(cuda_home), "12.4", "12.4.99")
    explicit = fake_ptxas(tmp_path / "explicit", "13.1")
    no_ptxas.setenv("PTXAS", str(explicit))
    assert find_ptxas().version == "13.1"


@posix_only
def test_pathfinder_is_the_last_resort(no_ptxas, tmp_path):
    wheel = fake_ptxas(tmp_path / "site-packages" / "nvidia" / "cu13" / "bin", "13.5")
    pathfinder = types.ModuleType("cuda.pathfinder")
    pathfinder.find_nvidia_binary_utility = lambda name: str(wheel) if name == "ptxas" else None
    no_ptxas.setitem(sys.modules, "cuda.pathfinder", pathfinder)
    assert find_ptxas().path == str(wheel)
    pathfinder.find_nvidia_binary_utility = lambda name: None
    with pytest.raises(PtxasNotFound, match="cuda.pathfinder \\(no NVIDIA wheel"):
        find_ptxas()


@posix_only
def test_a_wrong_ptxas_variable_is_an_error_not_skipped(no_ptxas, tmp_path):
    no_ptxas.setenv("PATH", str(fake_ptxas(tmp_path / "bin").parent))
    no_ptxas.setenv("PTXAS", str(tmp_path / "missing" / "ptxas"))
    with pytest.raises(PtxasNotFound, match=r"\$PTXAS is .*missing.*not an executable"):
        find_ptxas()


@posix_only
def test_a_binary_without_a_version_is_refused(no_ptxas, tmp_path):
    impostor = tmp_path / "ptxas"
    impostor.write_text("#!/bin/sh\necho hello\n")
    impostor.chmod(0o755)
    no_ptxas.setenv("PTXAS", str(impostor))
    with pytest.raises(PtxasNotFound, match="did not report a ptxas version"):
        find_ptxas()


@posix_only
def test_a_hanging_ptxas_times_out(no_ptxas, tmp_path):
    no_ptxas.setenv("PTXAS", str(fake_ptxas(tmp_path / "slow", body="exec /bin/sleep 30")))
    with pytest.raises(PtxasError) as caught:
        assemble(WARNS, arch="sm_90a", filename="slow.ptx", timeout=0.5)
    assert caught.value.diagnostics == [Diagnostic("slow.ptx", None, "error", "ptxas did not finish within 0.5 s")]


@posix_only
def test_a_silent_crash_still_gives_an_error(no_ptxas, tmp_path):
    no_ptxas.setenv("PTXAS", str(fake_ptxas(tmp_path / "crash", body="exit 3")))
    with pytest.raises(PtxasError, match="k.ptx: error: ptxas exited with status 3: no message") as caught:
        assemble(WARNS, filename="k.ptx")
    assert caught.value.returncode == 3


@posix_only
def test_ptxas_runs_in_a_private_directory_with_an_argument_list(no_ptxas, tmp_path):
    record = tmp_path / "argv.txt"
    body = f'pwd > "{record}"; for a in "$@"; do echo "$a" >> "{record}"; done; printf "x" > output.cubin'
    no_ptxas.setenv("PTXAS", str(fake_ptxas(tmp_path / "spy", body=body)))
    cubin = assemble(WARNS, arch="sm_90a", opt_level=1, options=("--maxrregcount=32", "a b;c"), cache=False)
    directory, *argv = record.read_text().splitlines()
    assert argv == ["-arch", "sm_90a", "-O1", "-v", "--maxrregcount=32", "a b;c", "input.ptx", "-o", "output.cubin"]
    assert Path(directory).name.startswith("ptxkit-ptxas-") and not Path(directory).exists()
    assert cubin.data == b"x"
    record.unlink()
    assemble(WARNS, cache=False)  # by default ptxas picks the level (debug PTX refuses -O3)
    assert record.read_text().splitlines()[1:] == ["-arch", "sm_90a", "-v", "input.ptx", "-o", "output.cubin"]


# --- the real ptxas ---------------------------------------------------------------------


def sample_target(name: str) -> int:
    return parse_target(ptxkit.parse((SAMPLES / f"{name}.ptx").read_text()).targets[0])[0]


@pytest.mark.ptxas
def test_ptxas_reports_its_version():
    info = find_ptxas()
    assert Path(info.path).is_file()
    assert info.full_version.startswith(info.version + ".")


@pytest.mark.ptxas
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(SAMPLE_KERNELS))
def test_samples_assemble_for_every_arch_their_target_allows(name, arch):
    path = SAMPLES / f"{name}.ptx"
    if parse_target(arch)[0] < sample_target(name):
        with pytest.raises(PtxasError) as caught:
            assemble(path.read_text(), arch=arch, filename=str(path))
        assert all(d.filename == str(path) for d in caught.value.diagnostics)
        assert ".target" in str(caught.value)
        return
    cubin = assemble(path.read_text(), arch=arch, filename=str(path))
    kernel = SAMPLE_KERNELS[name]
    assert cubin.data.startswith(b"\x7fELF") and cubin.arch == arch
    assert cubin.ptxas_version == find_ptxas().version
    assert kernel_names(cubin.data) == [kernel] == list(cubin.resources)
    assert cubin.resources[kernel].registers > 0
    assert cubin.diagnostics == ()


@pytest.mark.ptxas
def test_resource_usage_matches_what_the_kernels_declare():
    tma = assemble((SAMPLES / "tma_load.ptx").read_text()).resources["tma_load"]
    assert tma.shared_bytes == 4096 + 8  # the tile and the mbarrier
    assert assemble((SAMPLES / "vector_add.ptx").read_text()).resources["vector_add"].shared_bytes == 0
    local = BROKEN.replace("mov.u32 %r1, %r9;\n\tbogus.u32 %r1, %r2;", (
        ".local .align 4 .b8 scratch[64];\n\tmov.u32 %r1, %tid.x;\n\tst.local.u32 [scratch], %r1;"))
    assert assemble(local, opt_level=0).resources["broken"].stack_frame == 64


@pytest.mark.ptxas
def test_a_message_naming_the_file_names_the_callers():
    # ptxas names the file it read in some messages: ours is a private copy, input.ptx
    with pytest.raises(PtxasError) as caught:
        assemble("// no module here\n", filename="kernels/empty.ptx", cache=False)
    assert "Missing .version directive at start of file 'kernels/empty.ptx'" in str(caught.value)
    assert "input.ptx" not in str(caught.value)


@pytest.mark.ptxas
def test_errors_point_at_the_callers_lines():
    with pytest.raises(PtxasError) as caught:
        assemble(BROKEN, filename="kernels/broken.ptx")
    errors = {(d.filename, d.line) for d in caught.value.diagnostics if d.line is not None}
    assert errors == {("kernels/broken.ptx", 8), ("kernels/broken.ptx", 9)}
    assert "kernels/broken.ptx:8:1: error: Unknown symbol '%r9' [ptxas]" in str(caught.value)
    assert "kernels/broken.ptx:9:1: error: Not a name of any known instruction: 'bogus' [ptxas]" in str(caught.value)
    assert "input.ptx" not in str(caught.value)
    assert caught.value.returncode == 255


@pytest.mark.ptxas
def test_a_parsed_module_is_assembled_under_its_own_file_name():
    module = ptxkit.parse(BROKEN, "from-module.ptx")
    with pytest.raises(PtxasError) as caught:
        assemble(module)
    assert {d.filename for d in caught.value.diagnostics} == {"from-module.ptx"}
    fine = ptxkit.parse((SAMPLES / "empty.ptx").read_text(), "empty.ptx")
    assert list(assemble(fine).resources) == ["empty"]


@pytest.mark.ptxas
def test_warnings_are_kept_on_the_cubin_and_shown_when_verbose(capsys):
    cubin = assemble(WARNS, filename="w.ptx", verbose=True)
    assert cubin.diagnostics == (
        Diagnostic("w.ptx", 8, "warning", ".minnctapersm is ignored when neither .maxntid nor .reqntid is specified."),
    )  # ptxas reports it at the function's closing brace
    shown = capsys.readouterr().err
    assert "w.ptx:8:1: warning: .minnctapersm" in shown and "Used 4 registers" in shown
    assert assemble(WARNS, filename="w.ptx").log == shown  # quiet by default, same report
    assert capsys.readouterr().err == ""


@pytest.mark.ptxas
def test_extra_options_reach_ptxas():
    with pytest.raises(PtxasError, match="Unknown option"):
        assemble(WARNS, options=("--no-such-option",))


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"arch": "sm_9"}, ValueError),
        ({"opt_level": 4}, ValueError),
        ({"options": "--maxrregcount=32"}, TypeError),
        ({"options": ("-o", "elsewhere.cubin")}, ValueError),
        ({"options": ("--output-file=x",)}, ValueError),
    ],
)
def test_bad_arguments_are_refused_before_running_ptxas(kwargs, error):
    with pytest.raises(error):
        assemble(WARNS, **kwargs)


def test_only_text_bytes_or_modules_are_assembled():
    with pytest.raises(TypeError, match="expected PTX text"):
        assemble(42)


@pytest.mark.ptxas
def test_an_instrumented_kernels_layout_comes_with_its_cubin():
    """The ``// ptxkit-instrument:`` lines of the PTX become `Cubin.layouts`, which is
    how `ptxkit.runtime` knows to allocate and decode a buffer; plain PTX has none."""
    from ptxkit.instrument.layout import Layout, Point, layout_comment

    text = (SAMPLES / "vector_add.ptx").read_text()
    layout = Layout.timeline("vector_add", [Point("kernel", "function", 8)], capacity=64)
    marked = text.replace(".address_size 64\n", ".address_size 64\n" + layout_comment(layout) + "\n", 1)
    assert marked != text
    assert assemble(marked, cache=False).layouts == {"vector_add": layout}
    assert assemble(marked).layouts == {"vector_add": layout}  # from the cache too
    assert assemble(text).layouts == {}
