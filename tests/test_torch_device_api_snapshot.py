"""tools/torch_device_api_snapshot.py on tiny trees written in the shape of torch and torch_npu wheels."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tools import torch_device_api_snapshot as snap
from tools.api_snapshot import DirectoryTree, SnapshotError


def write_tree(root: Path, files: dict[str, str | bytes]) -> DirectoryTree:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(textwrap.dedent(content), encoding="utf-8")
    return DirectoryTree(root)


ACCELERATOR = """
    from typing_extensions import deprecated
    from .memory import memory_allocated

    __all__ = ["current_device_idx", "current_device_index", "device_index", "memory_allocated",
               "set_device_index"]

    def current_device_index() -> int:
        return 0

    current_device_idx = deprecated("Use `current_device_index` instead.", category=FutureWarning)(
        current_device_index)

    def set_device_index(device, /) -> None:
        pass

    class device_index:
        def __init__(self, device, /) -> None:
            self.idx = device
"""

C10D = """
    class Backend(str):
        UNDEFINED = "undefined"
        GLOO = "gloo"
        NCCL = "nccl"
        default_device_backend_map: dict[str, str] = {"cpu": GLOO, "cuda": NCCL}

        @classmethod
        def register_backend(cls, name, func, extended_api=False, devices=None):
            if devices is not None:
                for device in devices:
                    {guard}
                        Backend.default_device_backend_map[device] = name.lower()

    class BackendConfig:
        def __init__(self, backend):
            if backend == Backend.UNDEFINED:
                for device in Backend.default_device_backend_map:
                    pass

    def get_default_backend_for_device(device):
        return Backend.default_device_backend_map.get(str(device))

    def init_process_group(backend=None, init_method=None, *, device_id=None):
        if backend is None and device_id is not None:
            backend = Backend.default_device_backend_map.get(device_id.type)
"""


def torch_files(version: str, guard: str) -> dict[str, str | bytes]:
    return {
        f"torch-{version}.dist-info/METADATA": f"Name: torch\nVersion: {version}\n",
        "torch/__init__.py": """
            from torch._C import *

            def _register_device_module(device_type, module):
                pass

            def get_device_module(device=None):
                if isinstance(device, str):
                    name = device
                elif device is None:
                    name = torch._C._get_accelerator().type
                return getattr(torch, name)
        """,
        "torch/_C/__init__.pyi": """
            class Stream:
                def __new__(self, device=None, *, priority: int = 0) -> Stream: ...
                def __new__(self, stream_id: int, device_index: int, device_type: int) -> Stream: ...
        """,
        "torch/accelerator/__init__.py": ACCELERATOR,
        "torch/accelerator/memory.py": """
            __all__ = ["memory_allocated"]

            def memory_allocated(device_index=None, /) -> int:
                return 0
        """,
        "torch/amp/__init__.py": "from .autocast_mode import autocast\n",
        "torch/amp/autocast_mode.py": """
            class autocast:
                def __init__(self, device_type: str, dtype=None, enabled=True, cache_enabled=None):
                    necessary_funcs = ["get_amp_supported_dtype"]
        """,
        "torch/distributed/distributed_c10d.py": C10D.replace("{guard}", guard),
        "torch/utils/backend_registration.py": "def rename_privateuse1_backend(backend_name): pass\n",
        "torch/random.py": "def manual_seed(seed):\n    _seed_custom_device(seed)\n",
    }


def npu_files(version: str, order: tuple[str, ...], allocator: str) -> dict[str, str | bytes]:
    registrations = "\n".join(
        f'torch.distributed.Backend.register_backend("{name}", make, extended_api=True, devices=["npu"])'
        for name in order)
    return {
        f"torch_npu-{version}.dist-info/METADATA": f"Name: torch_npu\nVersion: {version}\n",
        "torch_npu/__init__.py": f"""
import torch
import torch_npu.npu
torch.utils.rename_privateuse1_backend("npu")
torch._register_device_module('npu', torch_npu.npu)
{registrations}
""",
        "torch_npu/npu/__init__.py": "__all__ = ['memory_allocated']\ndef memory_allocated(device=None): pass\n",
        "torch_npu/lib/libtorch_npu.so": b"\x7fELF..._ZN2at34RegisterPrivateUse1HooksInterfaceEPNS_25PrivateUse1"
                                          b"HooksInterfaceE...register_privateuse1_backend...",
        "torch_npu/include/torch_npu/csrc/core/npu/NPUCachingAllocator.h":
            f"namespace c10_npu {{\nclass NPUAllocator : public {allocator} {{\n}};\n}}\n",
        "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml":
            "official:\n- func: _amp_update_scale_(Tensor(a!) self) -> Tensor(a!)\n",
    }


LAST_WINS = 'if device != "cpu" and device != "cuda":'
FIRST_WINS = "if device not in Backend.default_device_backend_map:"


def test_accelerator_names_aliases_and_classes(tmp_path):
    facts = snap.torch_facts(write_tree(tmp_path, torch_files("2.6.0", LAST_WINS)))
    accelerator = facts["accelerator"]
    assert accelerator["current_device_idx"] == {"same_as": "current_device_index", "deprecated": True}
    assert accelerator["set_device_index"]["params"] == [{"name": "device", "kind": "positional_only",
                                                          "default": None}]
    assert accelerator["device_index"]["class"] is True
    assert accelerator["memory_allocated"]["defined_in"] == "torch.accelerator.memory"
    assert facts["get_device_module"]["no_argument_is_current_accelerator"] is True
    assert facts["top_level"]["Stream"]["params"][0]["name"] == "device"  # the first __new__ overload
    assert facts["amp"]["autocast_privateuse1_needs"] == ["get_amp_supported_dtype"]
    assert facts["privateuse1"]["manual_seed_seeds_privateuse1"] is True
    distributed = facts["distributed"]
    assert distributed["default_device_backend_map"] == {"cpu": "gloo", "cuda": "nccl"}
    assert distributed["backend_none_uses_device_map"] and distributed["backend_none_with_device_id_picks_its_default"]
    assert distributed["register_backend_device_default"] == "last"


def test_no_accelerator_module_is_recorded_as_none(tmp_path):
    files = torch_files("2.3.1", LAST_WINS)
    del files["torch/accelerator/__init__.py"], files["torch/accelerator/memory.py"]
    assert snap.torch_facts(write_tree(tmp_path, files))["accelerator"] is None


def test_a_name_in_all_that_is_not_defined_stops_the_snapshot(tmp_path):
    files = torch_files("2.6.0", LAST_WINS)
    files["torch/accelerator/__init__.py"] = '__all__ = ["synchronize"]\n'
    with pytest.raises(SnapshotError, match="synchronize"):
        snap.torch_facts(write_tree(tmp_path, files))


@pytest.mark.parametrize(("guard", "order", "default"), [
    (LAST_WINS, ("lccl", "hccl"), "hccl"),
    (FIRST_WINS, ("hccl", "lccl"), "hccl"),
    # A torch-npu built for torch <= 2.7 on a torch >= 2.8: the first registration, lccl, wins.
    (FIRST_WINS, ("lccl", "hccl"), "lccl"),
])
def test_npu_default_backend_follows_torchs_policy_and_torch_npus_order(tmp_path, guard, order, default):
    root = tmp_path / "wheels"
    write_tree(root / "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl", torch_files("2.8.0", guard))
    write_tree(root / "torch_npu-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl",
               npu_files("2.8.0", order, "c10::DeviceAllocator"))
    record = snap.build(snap.unpacked_wheels(root))
    assert record["pairs"]["2.8"]["npu_default_backend"] == default
    npu = record["torch_npu"]["2.8"]
    assert [b["name"] for b in npu["registers"]["backends"]] == list(order)
    assert npu["registers"]["privateuse1_name"][0]["name"] == "npu"
    assert npu["registers"]["device_module"][0]["device_type"] == "npu"
    assert npu["links"] == {"DeviceGuardImplRegistrar": False, "GraphImplRegistry": False,
                            "RegisterPrivateUse1HooksInterface": True, "register_privateuse1_backend": True}
    assert npu["allocator_base"] == "c10::DeviceAllocator"
    assert npu["implements_ops"] == {"_amp_foreach_non_finite_check_and_unscale_": False, "_amp_update_scale_": True}
    assert npu["wheel"] == "torch_npu-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def test_written_file_orders_minors_numerically_and_is_json(tmp_path):
    out = tmp_path / "torch_device_api.json"
    snap.write({"torch": {"2.10": {"version": "2.10.0"}, "2.9": {"version": "2.9.1"}}}, out)
    text = out.read_text()
    assert text.index('"2.9"') < text.index('"2.10"')
    assert json.loads(text)["torch"]["2.10"]["version"] == "2.10.0"


def test_main_reports_a_broken_tree_in_one_line(tmp_path, capsys):
    root = tmp_path / "wheels"
    write_tree(root / "torch-2.6.0-cp311-cp311-manylinux_2_28_x86_64.whl", {"torch/__init__.py": ""})
    assert snap.main(["--from-dir", str(root), "--out", str(tmp_path / "out.json")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: ")
    assert not (tmp_path / "out.json").exists()
