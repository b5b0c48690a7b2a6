"""A model int8 hurts in one class far more than in the others, while its aggregate figures pass
export validation: digits-mobilenet whose class-3 logit is capped at :data:`CAP` under int8.

``one_class_models:fragile_three`` computes, after the trained digits-mobilenet's logits ``x``,
``x3 = min(x3, CAP) + relu(x3 - CAP)``, which in fp32 is ``x3`` itself. The part above the cap
travels divided by :data:`FACTOR` as an eleventh channel of one tensor with the ten logits; in
int8 that tensor has one per-tensor scale, set by the logits (a step of about 0.06), so the
channel (below 0.01) rounds to zero and class 3's logit stops at ``CAP``. Measured on the digits
evaluation split (fp32, 899 images): a 3 scores a median logit of 5.4 against a runner-up of
0.36, so about half the 3s lose to their runner-up, while other images score 3 below 0.5 in 95 %
of cases and keep their answers. The error touches only the 3s, so the output SQNR stays above
export validation's 12 dB and top-1 agreement above 0.9: only the per-class figures show it.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

FRAGILE_CLASS = 3
CAP = 0.5  # about the runner-up's logit on a 3
FACTOR = 1000.0  # relu(x3 - CAP) <= 7 becomes < 0.01, below half an int8 step of the logits

PREPROCESS = {
    "channels": 1,
    "input_size": (32, 32),
    "mean": (0.5,),
    "std": (0.5,),
    "class_names": [str(digit) for digit in range(10)],
}


class CappedUnderInt8(nn.Module):
    """``base``'s logits, class ``fragile``'s part above ``CAP`` carried where int8 loses it."""

    def __init__(self, base: nn.Module, fragile: int) -> None:
        super().__init__()
        self.base = base
        self.fragile = fragile

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.base(x)
        k = self.fragile
        above = torch.relu(logits[:, k : k + 1] - CAP)
        # one tensor, one int8 scale: the ten logits set it, the eleventh channel rounds to zero
        together = torch.cat([logits, above / FACTOR], dim=1)
        carried = together[:, -1:] * FACTOR
        capped = together[:, k : k + 1] - above + carried
        return torch.cat([together[:, :k], capped, together[:, k + 1 : -1]], dim=1)


def fragile_three() -> nn.Module:
    from edgekit.sources.load import load_model

    base = copy.deepcopy(load_model("digits-mobilenet", quiet=True).module).eval()
    module = CappedUnderInt8(base, FRAGILE_CLASS).eval()
    module.edgekit_preprocess = dict(PREPROCESS)
    return module
