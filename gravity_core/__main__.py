"""``python -m gravity_core`` runs the ``gravity`` command."""

from gravity_core.cli import main

main()
