"""Command-line handlers: argument handling, progress, tables and exit codes.

One module per command (``bench``, ``tune``, ``profile``, ``doctor``, ``draft``), each
dispatched lazily by :mod:`specdash.cli`; :mod:`specdash.commands.errors` holds the one
:class:`~specdash.commands.errors.ExitCode` enum and the one exception → exit-code mapping.
Engines (``launch``, ``bench``, ``eagle3``, …) never import this package.
"""
