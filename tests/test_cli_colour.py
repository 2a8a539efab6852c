"""``ptxkit.cli.colour``: colour on a terminal only, NO_COLOR and TERM=dumb honoured."""

from __future__ import annotations

import io

import pytest

from ptxkit.cli.colour import diagnostic, wanted


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("environment, stream, choice, expected", [
    ({}, Terminal(), "auto", True),
    ({}, io.StringIO(), "auto", False),  # piped or redirected
    ({"NO_COLOR": "1"}, Terminal(), "auto", False),
    ({"NO_COLOR": ""}, Terminal(), "auto", True),  # no-color.org: set and not empty
    ({"TERM": "dumb"}, Terminal(), "auto", False),
    ({"NO_COLOR": "1"}, io.StringIO(), "always", True),
    ({}, Terminal(), "never", False),
])
def test_when_diagnostics_are_coloured(monkeypatch, environment, stream, choice, expected):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert wanted(choice, stream) is expected


def test_a_coloured_diagnostic_reads_as_the_plain_one_without_its_escapes():
    import re

    plain = diagnostic("k.ptx:3:2", "warning", "a cp.async write may still be in flight", "ptxkit.fence.in-flight",
                       False)
    coloured = diagnostic("k.ptx:3:2", "warning", "a cp.async write may still be in flight", "ptxkit.fence.in-flight",
                          True)
    assert plain == "k.ptx:3:2: warning: a cp.async write may still be in flight [ptxkit.fence.in-flight]"
    assert coloured != plain and re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
