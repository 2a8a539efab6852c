"""The ``ptxkit`` command line: one module per subcommand, imported only when run."""
