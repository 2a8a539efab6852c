"""Colour in diagnostics, as compilers show it: on a terminal only, never when the
output is piped or redirected, and never when ``NO_COLOR`` is set to anything
(no-color.org); ``--color always`` or ``never`` decides instead.

>>> paint("error:", "error", True) == "\\x1b[1;31merror:\\x1b[0m", paint("error:", "error", False)
(True, 'error:')
"""

from __future__ import annotations

import os

CHOICES = ("auto", "always", "never")

#: What each part of a diagnostic is shown in (SGR codes): gcc's and clang's choice.
_STYLES = {"location": "1", "error": "1;31", "warning": "1;35", "note": "1;36", "rule": "2"}


def wanted(choice: str, stream) -> bool:
    """True when diagnostics written to `stream` should be coloured.

    >>> import io
    >>> wanted("auto", io.StringIO()), wanted("always", io.StringIO()), wanted("never", io.StringIO())
    (False, True, False)
    """
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def paint(text: str, style: str, on: bool) -> str:
    """`text` in the colour of `style` (``location``, ``error``, ``warning``, ``note``,
    ``rule``) when `on`."""
    return f"\x1b[{_STYLES[style]}m{text}\x1b[0m" if on else text


def diagnostic(location: str, severity: str, message: str, rule: str | None, on: bool) -> str:
    """``location: severity: message [rule]``, coloured when `on`.

    >>> diagnostic("k.ptx:3:2", "error", "missing fence", "ptxkit.fence.raw", False)
    'k.ptx:3:2: error: missing fence [ptxkit.fence.raw]'
    """
    text = f"{paint(location + ':', 'location', on)} {paint(severity + ':', severity, on)} {message}"
    return text + (f" {paint(f'[{rule}]', 'rule', on)}" if rule else "")
