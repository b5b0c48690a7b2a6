"""``python -m edgekit.cli``: what the ``edgekit`` supervisor runs."""

from edgekit.common.shutdown import collect_once_at_exit

collect_once_at_exit()

from edgekit.cli import main  # noqa: E402  (after the exit step: see edgekit.common.shutdown)

main()
