"""The ``skill-server`` command line: one module per command group."""
