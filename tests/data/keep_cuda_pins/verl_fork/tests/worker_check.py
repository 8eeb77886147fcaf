import torch
from verl.workers.fsdp_worker import build


def build_once():
    torch.cuda.synchronize()
    assert build() is not None
