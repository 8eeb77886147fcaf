import torch
from verl.workers.fsdp_worker import build


def test_build():
    torch.cuda.synchronize()
    assert build() is not None
