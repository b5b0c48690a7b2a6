"""What ExecuTorch plans for a .pte's activations: the memory plan the program carries
(``non_const_buffer_sizes`` of its ``forward`` execution plan; buffer 0 is reserved). The export
records it in the manifest (``details.planned_memory_bytes``); a file without one is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError, first_line
from edgekit.targets.base import PlannedMemory
from edgekit.targets.executorch.plan import planned_bytes

SOURCE = (
    "the .pte's memory plan (the tensors between delegate calls; XNNPACK's workspace "
    "inside a delegate is not planned there)"
)


def planned_memory(path: Path, details: dict[str, Any] | None = None) -> PlannedMemory:
    if details and details.get("planned_memory_bytes") is not None:
        return PlannedMemory(int(details["planned_memory_bytes"]), SOURCE + ", as exported")
    from edgekit.targets.executorch.convert import quiet_library_noise

    quiet_library_noise()  # importing exir loads torchao, which logs its CUDA kernels missing
    try:
        from executorch.exir._serialize._program import deserialize_pte_binary

        program = deserialize_pte_binary(Path(path).read_bytes()).program
    except Exception as exc:
        raise UserInputError(f"{path}: not a readable .pte ({first_line(exc)})") from None
    return PlannedMemory(planned_bytes(program), SOURCE + ", read from the file")
