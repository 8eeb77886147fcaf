"""The mapping tables are data reviewed like code: well-formed, and every emitted name exists upstream."""

from __future__ import annotations

from npu_port.codemods._torch_cuda_table import table_for
from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.mapping import available_targets, load_table

TORCH_NPU = api_facts.load("torch_npu")


def _exists_in_torch_npu(npu_name: str) -> bool:
    real = "torch_npu.npu" + npu_name[len("torch.npu"):]
    module, _, name = real.rpartition(".")
    return TORCH_NPU.has(module, name) or TORCH_NPU.knows_module(real)


def test_every_torch_npu_name_in_the_table_exists_in_torch_npu():
    table = table_for("ascend")
    missing = [r.npu for r in table.rows.values() if r.npu and r.npu.startswith("torch.npu")
               and not _exists_in_torch_npu(r.npu)]
    assert not missing, f"names torch-npu {TORCH_NPU.version} lacks: {missing}"
    for path in table.module_paths.values():
        assert path in ("torch", "torch.npu") or TORCH_NPU.knows_module(path), path


def test_rows_are_well_formed_and_unique():
    data = load_table("ascend", "torch_cuda")
    seen = set()
    for row in data["rows"]:
        assert row["cuda"].startswith("torch.cuda"), row
        assert row["cuda"] not in seen, row
        seen.add(row["cuda"])
        status = row.get("status", "same")
        assert status in ("same", "analogue", "differs", "unsupported"), row
        assert bool(row.get("npu")) == (status != "unsupported"), row
        if status in ("unsupported", "differs"):
            assert row.get("hint"), f"{status} rows need a hint for the report: {row}"


def test_unsupported_names_are_rows_too():
    table = table_for("ascend")
    for name in ("torch.cuda.nvtx.range", "torch.cuda.jiterator", "torch.cuda.get_arch_list"):
        assert table.rows[name].status == "unsupported"


def test_targets_are_folders_of_data():
    assert "ascend" in available_targets()


def test_nccl_rule_targets_exist_in_torch_npu():
    from npu_port.codemods.nccl_backend import _IS_HCCL

    module, _, name = _IS_HCCL.rpartition(".")
    assert TORCH_NPU.has(module, name)
