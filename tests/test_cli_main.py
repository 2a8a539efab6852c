"""``ptxkit`` itself: every command's and subcommand's ``--help`` documents every option,
its exit codes and the environment it reads; a closed pipe ends a command quietly."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from ptxkit.cli.main import COMMANDS, build_parser, main

from conftest import ROOT, environment_variables


def walk(name: str, parser: argparse.ArgumentParser):
    """(name, parser) of `parser` and of every subcommand below it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub_parser in action.choices.items():
                yield from walk(f"{name} {sub_name}", sub_parser)


def command_parsers():
    """Every command and subcommand of ``ptxkit`` but ``ptxas`` (whose arguments are ptxas's)."""
    for command in COMMANDS:
        if command == "ptxas":
            continue
        top = build_parser(command)
        (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
        yield from walk(f"ptxkit {command}", commands.choices[command])


PARSERS = dict(command_parsers())


def test_every_command_and_subcommand_is_walked():
    assert {"ptxkit parse", "ptxkit fence", "ptxkit cfg", "ptxkit assemble", "ptxkit cache info",
            "ptxkit cache clear"} <= set(PARSERS)
    assert set(COMMANDS) - {"ptxas"} == {name.split()[1] for name in PARSERS}


@pytest.mark.parametrize("name", list(PARSERS))
def test_every_option_has_help(name):
    parser = PARSERS[name]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            undocumented = [choice.dest for choice in action._choices_actions if not choice.help]
            assert not undocumented and len(action._choices_actions) == len(action.choices), (name, undocumented)
        else:
            shown = action.option_strings or [action.dest]
            assert action.help and action.help != argparse.SUPPRESS, f"{name}: {'/'.join(shown)} has no help"


@pytest.mark.parametrize("name", list(PARSERS))
def test_every_help_lists_the_exit_codes(name):
    text = PARSERS[name].format_help()
    assert re.search(r"exit codes", text, re.IGNORECASE), name
    after = text[re.search(r"exit codes", text, re.IGNORECASE).start():]
    for code in ("0", "2", "101"):
        assert re.search(rf"(^|\s){code}\s", after), (name, code)
    if name == "ptxkit fence":
        assert re.search(r"^\s+1\s+--check: a fence is missing", after, re.MULTILINE)


def test_ptxkit_help_lists_every_environment_variable_and_the_exit_codes(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    variables = environment_variables(*(ROOT / folder for folder in ("ptxkit", "cfg", "generators")))
    variables -= {"PTXKIT_PTXAS_ACTIVE"}  # the wrapper's own guard: in ptxkit ptxas --help
    assert {"PTXKIT_CACHE_DIR", "PTXKIT_CACHE_MAX", "PTXKIT_FENCE_MODE", "PTXKIT_ON_ERROR"} <= variables
    assert [name for name in sorted(variables) if name not in text] == []
    for code, meaning in (("0", "success"), ("1", "--check"), ("2", "bad usage"), ("141", "closed")):
        assert re.search(rf"^\s+{code}\s+.*{meaning}", text, re.MULTILINE), code


@pytest.mark.parametrize("name", ["ptxkit assemble", "ptxkit cache info"])
def test_the_cache_settings_are_in_the_help_of_the_commands_that_read_them(name):
    text = PARSERS[name].format_help()
    assert "PTXKIT_CACHE_DIR" in text and "PTXKIT_CACHE_MAX" in text


def test_help_epilogs_keep_their_lines(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal does not run the sections together
    assert main(["parse", "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    codes = lines[lines.index("exit codes:") + 1:]
    assert [line.split()[0] for line in codes if not line.startswith("     ")] == ["0", "2", "101", "130", "141"]


# -- a closed pipe ---------------------------------------------------------------------------------


def _closed_pipe(command: str) -> tuple[int, str, str]:
    """Run ``command | head -1`` in bash; returns (ptxkit's status, head's output, stderr)."""
    script = f"set -o pipefail; {command} | head -1; echo \"status=${{PIPESTATUS[0]}}\" >&2"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600)
    status = int(re.search(r"status=(\d+)", done.stderr).group(1))
    return status, done.stdout, re.sub(r"status=\d+\n", "", done.stderr)


@pytest.mark.parametrize("arguments, first", [
    (["parse", "samples/"], "samples/"),
    (["fence", "--diff", "-j", "2", "samples/fence"], "--- samples/fence/"),
], ids=["parse", "fence -j 2"])
def test_a_closed_pipe_ends_the_command_quietly_with_sigpipes_status(arguments, first):
    command = " ".join([sys.executable, "-m", "ptxkit", *arguments])
    status, out, err = _closed_pipe(command)
    assert out.startswith(first) and out.count("\n") == 1
    assert status == 141  # 128 + SIGPIPE, as a shell reports `cat big | head -1`
    assert not re.search(r"Broken pipe|Traceback|Exception|error", err, re.IGNORECASE), err  # no word about it
