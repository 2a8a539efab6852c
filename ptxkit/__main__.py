"""``python -m ptxkit``: the same as the ``ptxkit`` command."""

from ptxkit.cli.main import console_main

console_main()
