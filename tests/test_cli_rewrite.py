"""``ptxkit rewrite``: passes from the command line, outputs, JSON, errors."""

from __future__ import annotations

import json

from ptxkit.cli.main import main

from conftest import SAMPLES

FENCED = SAMPLES / "fence" / "expected" / "14b_hoist_out_of_loop.ptx"
UNFENCED = SAMPLES / "fence" / "14b_hoist_out_of_loop.ptx"

USER_PASS = '''
from ptxkit.rewrite import Plan, match

def stamp_waits(module, hint="t"):
    plan = Plan(module)
    for k in plan.kernels():
        t = k.fresh_register(".u64", hint)
        for op in k.find(match.async_proxy()):
            k.insert(k.before(op), f"mov.u64 {t}, %globaltimer;")
    plan.info["hint"] = hint
    return plan
'''


def test_strip_then_check_finds_the_race(tmp_path, capsys):
    stripped = tmp_path / "k.ptx"
    assert main(["rewrite", str(FENCED), "--pass", "strip-fences", "-o", str(stripped)]) == 0
    assert "fence.proxy" not in stripped.read_text() and capsys.readouterr().out == ""
    assert main(["fence", "--check", str(stripped)]) == 1
    assert "missing fence.proxy.async.shared::cta" in capsys.readouterr().err


def test_a_user_pass_then_the_fence_pass(tmp_path, capsys):
    module = tmp_path / "stamps.py"
    module.write_text(USER_PASS)
    assert main(["rewrite", str(UNFENCED), "--pass", f"{module}:stamp_waits --hint when"]) == 0
    out = capsys.readouterr().out
    assert "mov.u64 %ptxkit_when, %globaltimer;" in out and "fence.proxy.async.shared::cta;" in out
    assert main(["rewrite", str(UNFENCED), "--pass", f"{module}:stamp_waits", "--no-fence", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [stage["name"] for stage in report["stages"]] == [f"{module}:stamp_waits"]
    assert report["stages"][0]["info"] == {"hint": "t"} and report["fence"] is None


def test_in_place_and_diff(tmp_path, capsys):
    copy = tmp_path / "k.ptx"
    copy.write_text(FENCED.read_text())
    assert main(["rewrite", "--diff", str(copy), "--pass", "strip --opcode wgmma.fence*"]) == 0
    diff = capsys.readouterr().out
    assert "-\twgmma.fence.sync.aligned;" in diff and copy.read_text() == FENCED.read_text()
    assert main(["rewrite", "-i", str(copy), "--pass", "strip --opcode wgmma.fence*"]) == 0
    assert "wgmma.fence" not in copy.read_text()


def test_errors_exit_2_and_leave_files_alone(tmp_path, capsys):
    out = tmp_path / "out.ptx"
    assert main(["rewrite", str(UNFENCED), "--pass", "no-such-pass", "-o", str(out)]) == 2
    assert "not a shipped pass" in capsys.readouterr().err and not out.exists()
    bad = tmp_path / "bad.py"
    bad.write_text("def run(module):\n    raise RuntimeError('boom')\n")
    assert main(["rewrite", str(UNFENCED), "--pass", f"{bad}:run", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:run' failed: RuntimeError: boom" in err and "Traceback" in err and not out.exists()
    assert main(["rewrite", str(UNFENCED), str(FENCED), "--pass", "strip-fences"]) == 2
    assert "several inputs" in capsys.readouterr().err
