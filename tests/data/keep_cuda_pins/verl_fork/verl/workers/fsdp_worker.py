import torch
import torch.distributed as dist


class ActorWorker:
    def init_model(self, local_rank):
        torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl")
        self.device = torch.device("cuda", local_rank)
        self.buffer = torch.zeros(4, device="cuda")
        torch.cuda.manual_seed(0)

    def offload(self):
        self.buffer = self.buffer.cpu()
        torch.cuda.empty_cache()
        return torch.cuda.memory_allocated()
