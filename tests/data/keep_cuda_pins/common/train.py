"""One training script, converted for projects that pin different torch releases (test_keep_cuda_pins)."""
import random

import torch
from torch.cuda.amp import GradScaler


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def setup(local_rank):
    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
    name = "cuda:{}".format(torch.cuda.current_device())  # noqa: UP032 (the shape under test)
    return device, name, torch.cuda.device_count(), torch.cuda.get_device_name()


def step(model, batch, optimizer, scaler: GradScaler, communicator):
    model = model.cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(batch.to("cuda")).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    communicator.all_reduce(loss, stream=torch.cuda.current_stream())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        start.record()
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    peak = torch.cuda.max_memory_allocated() / 2**30
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.empty_cache()
    torch.cuda.ipc_collect()
    return loss, end, free, total, peak, torch.cuda.memory_allocated(), torch.cuda.get_rng_state()
