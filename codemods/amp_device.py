from __future__ import annotations

from typing import Optional

from npu_port.codemods._string_positions import StringPositionRule
from npu_port.codemods.device_string import agnostic_device, npu_device_text
from npu_port.transpiler.core.rules import CUDA_WORD


class AmpDevice(StringPositionRule):
    """Rewrite the AMP device type `"cuda"` to `"npu"` in autocast and GradScaler.

    What it does:
        `torch.autocast("cuda")`, `torch.amp.autocast(device_type="cuda")`, `torch.amp.GradScaler("cuda")`,
        `torch.is_autocast_enabled("cuda")`, `torch.get/set_autocast_dtype("cuda", ...)` and any
        `device_type=` keyword or setting get `"npu"`.

    Why:
        torch's device-generic AMP takes the device type as a string; on Ascend it is "npu". (The
        `torch.cuda.amp.*` spellings are handled by torch-cuda-api.)

    Example:
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        ->  with torch.autocast(device_type="npu", dtype=torch.bfloat16):

    With --keep-cuda:
        torch.autocast(device_type="cuda")
        ->  torch.autocast(device_type=torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu")

    Fix safety:
        safe: torch_npu registers "npu" as an autocast device type.
    """

    ID = "amp-device"
    SAFETY = "safe"
    TRIGGERS = ()
    TRIGGER_PATTERNS = (CUDA_WORD,)
    POSITION = "device_type"

    @staticmethod
    def new_text(text: str) -> Optional[str]:
        return npu_device_text(text)

    def agnostic_value(self, node, agnostic):
        return agnostic_device(node, agnostic.device_type())
