"""``python -m edgekit.cli``: what the ``edgekit`` supervisor runs."""

from edgekit.cli import main

main()
