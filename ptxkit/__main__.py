"""``python -m ptxkit``: the same as the ``ptxkit`` command."""

import sys

from ptxkit.cli.main import main

sys.exit(main())
