"""DDP's cost on emulated GPUs: one training script, plain and under DDP.

Run as `gpemu torch --gpus 2 --clock virtual --gpu G -- bench/torch_ddp.py [model] [batch]`:
spawns one rank per GPU (backend "nccl", gpemu's emulated process group),
times iterations of a torchvision model with CUDA events (emulated time),
first without DDP, then wrapped in DDP, and prints one JSON line per rank:
the iteration times, DDP's own runtime statistics (its timer runs on the
emulated streams: backward compute, communication, and their overlap), and
the time one all-reduce of all the gradients would take alone."""
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP


def iteration(model, opt, x, y):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def rank_main(rank, world, port, arch, batch):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    model = getattr(torchvision.models, arch)().cuda()
    x, y = torch.randn(batch, 3, 224, 224).cuda(), torch.randint(0, 1000, (batch,)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    plain = [iteration(model, opt, x, y) for _ in range(4)][-1]
    ddp = DDP(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    times = [iteration(ddp, opt, x, y) for _ in range(6)]
    stats = ddp._get_ddp_logging_data()
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print(json.dumps(dict(rank=rank, model=arch, batch=batch, gpu=torch.cuda.get_device_name(rank),
                          plain_ms=round(plain, 3), ddp_ms=round(times[-1], 3),
                          ddp_backward_compute_ms=stats["backward_compute_time"] / 1e6,
                          ddp_comm_ms=stats["backward_comm_time"] / 1e6,
                          ddp_overlap_ms=stats["backward_compute_comm_overlap_time"] / 1e6,
                          gradient_mib=round(grad_bytes / 2**20, 1),
                          all_gradients_all_reduce_ms=round(
                              torch.ops.gpemu.collective_seconds("all_reduce", grad_bytes, world) * 1e3, 3))),
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    arch = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = torch.cuda.device_count()
    mp.spawn(rank_main, args=(world, port, arch, batch), nprocs=world)
