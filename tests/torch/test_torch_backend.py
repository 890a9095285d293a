"""`gpemu torch -- script.py`: unmodified PyTorch code on emulated GPUs.

Run by ctest (python.torch) with GPEMU_BINARY naming the `gpemu` program. Each
test writes a small script, runs it under `gpemu torch --clock virtual` and
reads what it printed as JSON: times are the emulated timeline's (exact),
never the wall clock's."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

GPEMU = os.environ.get("GPEMU_BINARY")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20


def gpemu(*args, check=True):
    if not GPEMU:
        raise unittest.SkipTest("GPEMU_BINARY is not set (ctest sets it)")
    return subprocess.run([GPEMU, *args], check=check, capture_output=True, text=True, timeout=600)


def run_script_process(body, *options, script_args=()):
    """Runs `body` under gpemu torch --clock virtual; returns the finished process."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "script.py")
        with open(script, "w") as f:
            f.write("import json, torch\n" + textwrap.dedent(body))
        return gpemu("torch", "--clock", "virtual", *options, "--", script, *script_args, check=False)


def run_script(body, *options):
    """Runs `body` under gpemu torch; returns the JSON object it printed last."""
    out = run_script_process(body, *options)
    if out.returncode != 0:
        raise AssertionError(f"script failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class Devices(unittest.TestCase):
    def test_torch_cuda_describes_the_catalogued_cards(self):
        r = run_script("""
            p = torch.cuda.get_device_properties(1)
            print(json.dumps(dict(available=torch.cuda.is_available(), count=torch.cuda.device_count(),
                                  name=torch.cuda.get_device_name(0), major=p.major, total=p.total_memory,
                                  accelerator=torch.accelerator.is_available())))
        """, "--gpu", "h100", "--gpus", "2")
        h100 = json.loads(gpemu("devices", "--json").stdout)
        h100 = next(g for g in h100 if g["id"].startswith("H100"))
        self.assertTrue(r["available"])
        self.assertEqual(r["count"], 2)
        self.assertEqual(r["name"], h100["name"])
        self.assertEqual(r["major"], 9)
        self.assertTrue(r["accelerator"])
        self.assertGreater(r["total"], 70 << 30)

    def test_tensors_are_cuda_tensors_to_autograd(self):
        r = run_script("""
            x = torch.randn(4, 8, device="cuda:1", requires_grad=True)
            y = (x * 2).relu().sum()
            y.backward()
            print(json.dumps(dict(dev=str(y.device), grad=list(x.grad.shape), grad_dev=str(x.grad.device),
                                  item=y.item(), cpu=x.detach().cpu().sum().item())))
        """, "--gpus", "2")
        self.assertEqual(r["dev"], "cuda:1")
        self.assertEqual(r["grad"], [4, 8])
        self.assertEqual(r["grad_dev"], "cuda:1")
        self.assertEqual(r["item"], 0.0)  # the emulated GPU holds no values
        self.assertEqual(r["cpu"], 0.0)


class DevicePlacement(unittest.TestCase):
    def test_mixing_devices_is_refused_as_pytorch_refuses_it(self):
        r = run_script("""
            a = torch.ones(4, device="cuda:0")
            out = {}
            for name, other in (("cpu", torch.ones(4)), ("cuda1", torch.ones(4, device="cuda:1"))):
                try:
                    a + other
                    out[name] = "ran"
                except RuntimeError as e:
                    out[name] = str(e).splitlines()[0]
            out["scalar"] = list((a + torch.tensor(2.0)).shape)  # a host scalar joins any op
            out["index"] = list(a[torch.tensor([0, 2])].shape)  # host index tensors are moved
            print(json.dumps(out))
        """, "--gpus", "2")
        self.assertIn("Expected all tensors to be on the same device", r["cpu"])
        self.assertIn("cuda:0 and cpu", r["cpu"])
        self.assertIn("cuda:0 and cuda:1", r["cuda1"])
        self.assertEqual(r["scalar"], [4])
        self.assertEqual(r["index"], [2])


class Timeline(unittest.TestCase):
    def test_launch_returns_at_once_and_item_blocks(self):
        r = run_script("""
            a = torch.empty(4096, 4096, device="cuda")
            torch.cuda.synchronize()
            t0 = torch.ops.gpemu.now()
            for _ in range(10):
                b = a @ a
            t1 = torch.ops.gpemu.now()
            b.sum().item()
            t2 = torch.ops.gpemu.now()
            print(json.dumps(dict(issue=t1 - t0, total=t2 - t0)))
        """)
        # Issuing costs the calibrated launch time per op only; the GPU work
        # (10 x 137 GFLOP on a V100) takes far longer and item() waits for it.
        self.assertLess(r["issue"], 0.002)
        self.assertGreater(r["total"], 0.05)

    def test_pinned_non_blocking_copy_overlaps_and_pageable_blocks(self):
        r = run_script("""
            pinned = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
            pageable = torch.empty(64 << 20, dtype=torch.uint8)
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = torch.ops.gpemu.now()
            s.record(); d = pinned.to("cuda", non_blocking=True); e.record()
            t1 = torch.ops.gpemu.now()
            torch.cuda.synchronize()
            pinned_ms = s.elapsed_time(e)
            t2 = torch.ops.gpemu.now()
            d2 = pageable.to("cuda", non_blocking=True)
            t3 = torch.ops.gpemu.now()
            print(json.dumps(dict(is_pinned=pinned.is_pinned(), issue=t1 - t0, pinned_ms=pinned_ms,
                                  pageable=t3 - t2)))
        """)
        self.assertTrue(r["is_pinned"])
        self.assertEqual(r["issue"], 0.0)          # returned at once
        self.assertGreater(r["pinned_ms"], 1.0)    # 64 MiB over PCIe 3 x16
        self.assertGreater(r["pageable"], r["pinned_ms"] / 1000)  # blocked, at the slower pageable rate


class DataParallel(unittest.TestCase):
    def test_replicas_run_on_every_emulated_gpu(self):
        r = run_script("""
            import warnings
            warnings.simplefilter("ignore")
            net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                      torch.nn.Linear(16 * 30 * 30, 10))
            m = torch.nn.DataParallel(net).cuda()
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            out = m(torch.randn(8, 3, 32, 32))
            out.sum().backward()
            opt.step()
            torch.cuda.synchronize(1)
            print(json.dumps(dict(out=list(out.shape), dev=str(out.device),
                                  grad=str(net[0].weight.grad.device),
                                  mem=[torch.cuda.max_memory_allocated(d) for d in range(2)])))
        """, "--gpus", "2")
        self.assertEqual(r["out"], [8, 10])
        self.assertEqual(r["dev"], "cuda:0")
        self.assertEqual(r["grad"], "cuda:0")
        self.assertGreater(r["mem"][1], 0)  # the replica's parameters and activations


class Checkpoints(unittest.TestCase):
    def test_save_load_and_deepcopy_of_cuda_tensors(self):
        r = run_script("""
            import copy, io
            m = torch.nn.Linear(16, 4).cuda()
            buf = io.BytesIO()
            torch.save({"model": m.state_dict(), "step": 7}, buf)
            buf.seek(0)
            same = torch.load(buf)
            buf.seek(0)
            moved = torch.load(buf, map_location="cuda:1")
            clone = copy.deepcopy(m)
            print(json.dumps(dict(step=same["step"], dev=str(same["model"]["weight"].device),
                                  moved=str(moved["model"]["weight"].device),
                                  shape=list(moved["model"]["weight"].shape),
                                  clone=str(clone.weight.device),
                                  distinct=clone.weight.data_ptr() != m.weight.data_ptr())))
        """, "--gpus", "2")
        self.assertEqual(r, {"step": 7, "dev": "cuda:0", "moved": "cuda:1", "shape": [4, 16], "clone": "cuda:0",
                             "distinct": True})


class Phases(unittest.TestCase):
    def test_backward_and_optimizer_ops_are_told_apart(self):
        r = run_script("""
            seen = {}
            class Probe(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    seen["forward"] = torch.ops.gpemu.section()
                    return x * 2
                @staticmethod
                def backward(ctx, g):
                    seen["backward"] = torch.ops.gpemu.section()
                    return g * 2
            class Opt(torch.optim.SGD):
                def step(self, closure=None):
                    seen["step"] = torch.ops.gpemu.section()
                    return super().step(closure)
            w = torch.zeros(8, device="cuda", requires_grad=True)
            opt = Opt([w], lr=0.1)
            Probe.apply(w).sum().backward()
            opt.step()
            seen["after"] = torch.ops.gpemu.section()
            print(json.dumps(seen))
        """)
        self.assertEqual(r, {"forward": "forward", "backward": "backward", "step": "optimizer", "after": "forward"})


class Memory(unittest.TestCase):
    def test_out_of_memory_is_torchs_error(self):
        r = run_script("""
            try:
                torch.empty(40 << 30, dtype=torch.uint8, device="cuda")
                print(json.dumps(dict(raised=False)))
            except torch.cuda.OutOfMemoryError as e:
                print(json.dumps(dict(raised=True, message=str(e), allocated=torch.cuda.memory_allocated())))
        """)
        self.assertTrue(r["raised"])
        self.assertIn("CUDA out of memory", r["message"])
        self.assertEqual(r["allocated"], 0)

    def test_a_memory_fraction_bounds_what_the_process_reserves(self):
        # N14: set_per_process_memory_fraction was an AttributeError.
        r = run_script("""
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(0.25)
            try:
                torch.empty(total // 3, dtype=torch.uint8, device="cuda")
                oom = False
            except torch.cuda.OutOfMemoryError:
                oom = True
            fits = torch.empty(total // 5, dtype=torch.uint8, device="cuda").numel()
            torch.cuda.set_per_process_memory_fraction(1.0)
            more = torch.empty(total // 3, dtype=torch.uint8, device="cuda").numel()
            print(json.dumps(dict(oom=oom, fits=fits, more=more, total=total)))
        """, "--gpu", "v100")
        self.assertTrue(r["oom"])
        self.assertEqual(r["fits"], r["total"] // 5)
        self.assertEqual(r["more"], r["total"] // 3)


class HostSide(unittest.TestCase):
    def test_printing_a_cuda_tensor_shows_its_host_values_and_ipc_says_it_is_not_emulated(self):
        # N14: print(x) said "aten::masked_select has no shape rule", CUDA
        # IPC "CUDA is not available".
        r = run_script("""
            x = torch.tensor([1.0, 2.5]).cuda()
            try:
                x.storage()._share_cuda_()
                ipc = None
            except RuntimeError as e:
                ipc = str(e)
            print(json.dumps(dict(s=str(x), big=repr(torch.empty(100000, device="cuda"))[:30], ipc=ipc)))
        """)
        self.assertEqual(r["s"], "tensor([1.0000, 2.5000], device='cuda:0')")
        self.assertTrue(r["big"].startswith("tensor([0., 0., 0.,"), r["big"])
        self.assertIn("CUDA IPC", r["ipc"])
        self.assertIn("not emulated", r["ipc"])


class ResNet50(unittest.TestCase):
    """The acceptance check of issue 11: ResNet-50, batch 64, V100."""

    def test_memory_and_phase_times_match_predict(self):
        # The script of `gpemu bench torch` (bench/torch_bench.py), two measured iterations.
        # --torch 1 on both sides: PyTorch 1.x's program, the one torch 1.13 runs as it is.
        out = gpemu("torch", "--clock", "virtual", "--torch", "1", "--gpu", "v100", "--model", "resnet50", "--",
                     os.path.join(ROOT, "bench", "torch_bench.py"), "--batch", "64", "--iters", "2", "--warmup", "1",
                     "--micro-ops", "10")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        p = json.loads(gpemu("predict", "--model", "resnet50", "--gpu", "v100", "-b", "64", "--torch", "1",
                             "--json").stdout)
        self.assertLess(abs(r["forward_ms"] / p["forward_ms"] - 1), 0.10, (r, p["forward_ms"]))
        self.assertLess(abs(r["backward_ms"] / p["backward_ms"] - 1), 0.10, (r, p["backward_ms"]))
        self.assertLess(abs(r["peak_allocated_bytes"] / (p["peak_allocated_mib"] * MIB) - 1), 0.01, r)
        self.assertLess(abs(r["peak_reserved_bytes"] / (p["peak_reserved_mib"] * MIB) - 1), 0.01, r)

    def test_the_script_runs_out_of_memory_at_the_batch_predict_says(self):
        largest = json.loads(gpemu("predict", "--model", "resnet50", "--gpu", "v100", "--max-batch", "--torch", "1",
                                   "--json").stdout)
        n = largest["max_batch"]
        runs = {}
        for b in (n, n + 1):
            out = gpemu("torch", "--clock", "virtual", "--torch", "1", "--gpu", "v100", "--",
                        os.path.join(ROOT, "bench", "torch_bench.py"), "--batch", str(b), "--iters", "1", "--warmup",
                        "1", "--micro-ops", "10", check=False)
            runs[b] = (out.returncode, out.stderr)  # the traceback, then gpemu's summary
        self.assertEqual(runs[n][0], 0, runs[n])
        self.assertNotEqual(runs[n + 1][0], 0)
        self.assertIn("torch.cuda.OutOfMemoryError: CUDA out of memory", runs[n + 1][1])


class OpTable(unittest.TestCase):
    def test_live_classes_are_the_tracers(self):
        sys.path.insert(0, ROOT)
        from tools.tracer import opclass

        names = sorted(set().union(opclass.CONV, opclass.MATMUL, opclass.NORM, opclass.POOL, opclass.SOFTMAX,
                                   opclass.REDUCTION, opclass.EMBEDDING, opclass.COPY, opclass.VIEW,
                                   {"add", "relu_", "gelu"}))
        r = run_script(f"""
            names = {names!r}
            print(json.dumps({{n: [torch.ops.gpemu.op_class(n, False), torch.ops.gpemu.op_class(n, True)]
                               for n in names}}))
        """)
        for n in names:
            self.assertEqual(r[n], [opclass.classify(n, None), opclass.classify(n, "optimizer")], n)


class Command(unittest.TestCase):
    def test_script_arguments_pass_untouched(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "args.py")
            with open(script, "w") as f:
                f.write("import sys, json; print(json.dumps(sys.argv[1:]))\n")
            for args in (["--", script], [script], ["--gpu=h100", "--", script], ["--gpus", "2", script]):
                out = gpemu("torch", *args, "-a", "x", "--", "--gpu", "3", "y")
                self.assertEqual(json.loads(out.stdout), ["-a", "x", "--", "--gpu", "3", "y"], args)


    def test_summary_and_trace_are_written_when_the_script_ends(self):
        with tempfile.TemporaryDirectory() as tmp:
            script, summary, trace = (os.path.join(tmp, n) for n in ("s.py", "run.json", "trace.json"))
            with open(script, "w") as f:
                f.write("import torch\nx = torch.ones(256, 256, device='cuda')\n(x @ x).sum().item()\n"
                        "w = torch.nn.Parameter(torch.ones(64, 64, device='cuda'))\n"
                        "opt = torch.optim.SGD([w], lr=0.1)\n"
                        "for _ in range(3):\n    (w @ w).sum().backward(); opt.step(); opt.zero_grad()\n")
            report = os.path.join(tmp, "run.html")
            gpemu("torch", "--clock", "virtual", "--gpu", "a100", "--json", summary, "--trace", trace,
                  "--report", report, "--", script)
            with open(report) as f:
                page = f.read()
            with open(summary) as f:
                s = json.load(f)
            with open(trace) as f:
                t = json.load(f)
        self.assertEqual(s["clock"], "virtual")
        self.assertTrue(s["gpu"].startswith("A100"))
        self.assertGreaterEqual(s["kernels"], 3)  # fill, mm, sum
        # gpemu train's keys: an iteration is an optimizer step; phase times per iteration
        self.assertEqual(s["iterations"], 3)
        self.assertGreater(s["forward_ms_mean"], 0)
        self.assertGreater(s["backward_ms_mean"], 0)
        self.assertGreater(s["optimizer_ms_mean"], 0)
        self.assertAlmostEqual(s["iterations_per_s"], 3 / s["elapsed_s"])
        self.assertNotIn("processes", s)  # one process
        self.assertIn("GPU utilization over time", page)
        self.assertIn("GPU 0 · compute", page)
        self.assertGreater(s["emulated_seconds"], 0)
        events = t["traceEvents"] if isinstance(t, dict) else t
        names = {e.get("name") for e in events if e.get("ph") == "X"}
        self.assertIn("mm", names)

    def test_outputs_that_cannot_be_written_fail_the_run_each_named(self):
        # N8: the error came from an atexit hook, which leaves the exit status 0,
        # and the first failed output hid the others.
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        with tempfile.TemporaryDirectory() as tmp:
            script, report = os.path.join(tmp, "s.py"), os.path.join(tmp, "run.html")
            with open(script, "w") as f:
                f.write("import torch\n(torch.ones(8, device='cuda') * 2).sum().item()\nprint('script done')\n")
            out = gpemu("torch", "--clock", "virtual", "--json", "/dev/full", "--trace", "/dev/full",
                        "--report", report, "--", script, check=False)
            self.assertTrue(os.path.exists(report), "the output that can be written still is")
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("script done", out.stdout)
        self.assertIn("gpemu torch: error: --json: cannot write the gpemu torch summary '/dev/full'", out.stderr)
        self.assertIn("gpemu torch: error: --trace: cannot write the trace file '/dev/full'", out.stderr)
        self.assertIn("No space left on device", out.stderr)
        self.assertNotIn("Traceback", out.stderr)


class HostCost(unittest.TestCase):
    def test_ops_a_cpp_loop_issues_pay_the_cpp_launch_cost(self):
        # torch's comm.broadcast_coalesced is one C++ call issuing a copy per
        # tensor; the same copies from a Python loop pay the forward per-op
        # cost, which folds in Python (calibration: launch_forward_us).
        r = run_script("""
            import torch.cuda.comm as comm
            ts = [torch.zeros(16, device="cuda:0") for _ in range(50)]
            torch.cuda.synchronize()
            t0 = torch.ops.gpemu.now()
            comm.broadcast_coalesced(ts, [0, 1])
            t1 = torch.ops.gpemu.now()
            for t in ts:
                t.to("cuda:1")
            t2 = torch.ops.gpemu.now()
            print(json.dumps(dict(cpp=t1 - t0, python=t2 - t1)))
        """, "--gpu", "a100", "--gpus", "2")
        self.assertGreater(r["cpp"], 0)
        self.assertLess(r["cpp"], r["python"] / 4)


class RecordStream(unittest.TestCase):
    def test_a_block_another_stream_uses_is_not_reused_until_that_stream_is_done(self):
        body = """
            MiB = 1 << 20
            out = {}
            for record in (False, True):
                s = torch.cuda.Stream()
                t = torch.empty(64 * MiB // 4, device="cuda")  # on the default stream
                with torch.cuda.stream(s):
                    big = torch.empty(4096, 4096, device="cuda")
                    for _ in range(20):
                        big = big @ big  # work on s that t's use waits behind
                    if record:
                        t.record_stream(s)
                    t.add_(1)
                before, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
                del t
                freed = before - torch.cuda.memory_allocated()
                u = torch.empty(64 * MiB // 4, device="cuda")
                grew = torch.cuda.memory_reserved() - reserved
                s.synchronize()
                del u, big
                torch.cuda.empty_cache()
                out[str(record)] = dict(freed=freed, grew=grew)
            print(json.dumps(out))
        """
        r = run_script(body)
        # Without record_stream the default stream reuses the block at once;
        # with it, the block waits for s and a new segment is reserved.
        self.assertEqual(r["False"], dict(freed=64 * MIB, grew=0))
        self.assertEqual(r["True"], dict(freed=64 * MIB, grew=64 * MIB))


class Values(unittest.TestCase):
    def test_small_tensors_keep_the_values_the_host_gave_them(self):
        r = run_script("""
            t = torch.tensor([1.5, 2.5, 4.0], device="cuda")
            n = torch.tensor(7, device="cuda")
            copy = t.clone()  # a device copy keeps them
            view = t[1:].cpu().tolist()
            before = t.cpu().tolist()
            t.mul_(2)  # an op wrote to it: no longer the host's values
            big = torch.ones(32 << 10, device="cuda")  # 128 KiB: over the limit
            print(json.dumps(dict(before=before, view=view, item=n.item(), copy=copy.cpu().tolist(),
                                  after=t.cpu().tolist(), big=torch.ones(32 << 10).cuda().cpu().sum().item())))
        """)
        self.assertEqual(r["before"], [1.5, 2.5, 4.0])
        self.assertEqual(r["view"], [2.5, 4.0])
        self.assertEqual(r["item"], 7)
        self.assertEqual(r["copy"], [1.5, 2.5, 4.0])
        self.assertEqual(r["after"], [0.0, 0.0, 0.0])
        self.assertEqual(r["big"], 0.0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# One training step timed on emulated events (seconds), for the DDP scripts below.
ITERATION = """
import os, sys
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def iteration(model, opt, x, y):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3
"""


DDP_SCRIPT = ITERATION + """
import torch.multiprocessing as mp


def main(rank, world, port, out):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    r = dict(rank=rank, backend=dist.get_backend())
    t = torch.tensor([rank + 1.0, 10.0], device="cuda")
    dist.all_reduce(t)
    r["all_reduce"] = t.cpu().tolist()
    b = torch.tensor([rank * 7], device="cuda")
    dist.broadcast(b, src=1)
    r["broadcast"] = b.item()
    gathered = [torch.zeros(1, device="cuda") for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([rank + 0.5], device="cuda"))
    r["all_gather"] = [g.item() for g in gathered]
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                                torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
    x, y = torch.randn(256, 1024).cuda(), torch.randint(0, 10, (256,)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    r["plain"] = [iteration(model, opt, x, y) for _ in range(3)][-1]
    ddp = DDP(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    r["ddp"] = [iteration(ddp, opt, x, y) for _ in range(4)]
    stats = ddp._get_ddp_logging_data()
    r["comm_ns"] = stats["backward_comm_time"]
    r["overlap_ns"] = stats["backward_compute_comm_overlap_time"]
    r["buckets"] = [torch.ops.gpemu.collective_seconds("all_reduce", n, world) for n in (4096 * 4096 * 4 + 4096 * 4 + 10 * 4096 * 4 + 40, 1024 * 4096 * 4 + 4096 * 4)]
    dist.barrier()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(r, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(2, int(sys.argv[1]), sys.argv[2]), nprocs=2)
"""


# A rank's script up to its process group: main(rank, world, port, out)'s
# first lines, the rest of main indented under them.
RANK_HEAD = """
import os, sys
import torch.distributed as dist
import torch.multiprocessing as mp


def main(rank, world, port, out):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)"""


class Distributed(unittest.TestCase):
    def run_ranks(self, body, *options):
        with tempfile.TemporaryDirectory() as tmp:
            script, out = os.path.join(tmp, "ddp.py"), os.path.join(tmp, "rank")
            with open(script, "w") as f:
                f.write("import json, torch\n" + body)
            summary, report = os.path.join(tmp, "run.json"), os.path.join(tmp, "run.html")
            run = gpemu("torch", "--clock", "virtual", "--json", summary, "--report", report, *options, "--", script,
                        str(free_port()), out, check=False)
            self.summary, self.report = None, None
            if os.path.exists(summary):
                with open(summary) as f:
                    self.summary = json.load(f)
                with open(report) as f:
                    self.report = f.read()
            ranks = []
            for r in range(2):
                if os.path.exists(f"{out}.{r}"):
                    with open(f"{out}.{r}") as f:
                        ranks.append(json.load(f))
            return run, ranks

    def test_nccl_group_moves_small_values_and_ddp_overlaps_backward(self):
        run, ranks = self.run_ranks(DDP_SCRIPT, "--gpu", "a100", "--gpus", "2")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(len(ranks), 2)
        for r in ranks:
            self.assertEqual(r["backend"], "nccl")
            self.assertEqual(r["all_reduce"], [3.0, 20.0])
            self.assertEqual(r["broadcast"], 7)
            self.assertEqual(r["all_gather"], [0.5, 1.5])
            # Gradient all-reduce costs time, but less than it takes: the
            # buckets overlap backward (DDP's own timer, on emulated events).
            self.assertGreater(r["ddp"][-1], r["plain"])
            self.assertGreater(r["overlap_ns"], 0)
            # The buckets run one after the other on the communication stream.
            self.assertGreaterEqual(r["comm_ns"], sum(r["buckets"]) * 1e9 * 0.999)
        # The collectives hold the ranks together: the same emulated times.
        self.assertEqual(ranks[0]["ddp"], ranks[1]["ddp"])
        # The run's summary and report hold both ranks (each its own process).
        procs = self.summary["processes"]
        self.assertEqual(len(procs), 2)
        self.assertEqual([p["iterations"] for p in procs], [7, 7])  # 3 plain steps, 4 with DDP
        self.assertEqual(self.summary["iterations"], 7)
        self.assertGreater(min(p["collectives"] for p in procs), 8)
        self.assertEqual(self.summary["collectives"], sum(p["collectives"] for p in procs))
        self.assertGreater(procs[0]["devices"][0]["collective_busy_seconds"], 0)
        self.assertEqual(procs[1]["devices"][0]["kernels"], 0)  # rank 1 used cuda:1 only
        self.assertGreater(procs[1]["devices"][1]["kernels"], 0)
        self.assertEqual(self.report.count("communication:"), 2)
        self.assertNotIn("do not share an emulated GPU", run.stderr)  # each rank on its own GPU

    def test_a_dead_rank_ends_the_run_with_an_error(self):
        body = RANK_HEAD + """
    if rank == 1:
        os._exit(3)
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)


if __name__ == "__main__":
    mp.spawn(main, args=(2, int(sys.argv[1]), sys.argv[2]), nprocs=2)
"""
        run, _ = self.run_ranks(body, "--gpus", "2")
        self.assertNotEqual(run.returncode, 0)
        # mp.spawn names the first rank it sees end: rank 1 (exit code 3), or
        # rank 0, which ends itself when its all_reduce cannot complete.
        self.assertTrue("exit code 3" in run.stderr or "rank 1 (pid" in run.stderr, run.stderr)


# One rank of a job under torchrun's environment (one `gpemu torch` per
# rank, as torchrun --no_python would start them): DDP steps of an MLP.
TORCHRUN_RANK = ITERATION + """
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                            torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
ddp = DDP(model, device_ids=[local])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
x, y = torch.randn(256, 1024).cuda(), torch.randint(0, 10, (256,)).cuda()
steps = [iteration(ddp, opt, x, y) for _ in range(3)]
# DDP's two buckets (the last layers' gradients, then the first's), in the order they are reduced.
buckets = [torch.ops.gpemu.collective_seconds("all_reduce", n, 2)
           for n in (4096 * 4096 * 4 + 4096 * 4 + 10 * 4096 * 4 + 40, 1024 * 4096 * 4 + 4096 * 4)]
dist.barrier()
with open(sys.argv[1] + "." + os.environ["RANK"], "w") as f:
    json.dump(dict(step=steps[-1], buckets=buckets), f)
dist.destroy_process_group()
"""


class Nodes(unittest.TestCase):
    """Ranks on two nodes of one GPU (torchrun's WORLD_SIZE=2, LOCAL_WORLD_SIZE=1)
    against the same two ranks on one node (LOCAL_WORLD_SIZE=2)."""

    def test_ranks_on_two_nodes_pay_the_networks_time(self):
        if not GPEMU:
            raise unittest.SkipTest("GPEMU_BINARY is not set (ctest sets it)")
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "rank.py")
            with open(script, "w") as f:
                f.write("import json, torch\n" + TORCHRUN_RANK)
            procs = []
            for layout, per_node in (("nodes", 1), ("node", 2)):
                port = free_port()
                for rank in range(2):
                    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                               RANK=str(rank), LOCAL_RANK=str(rank % per_node), LOCAL_WORLD_SIZE=str(per_node),
                               GROUP_RANK=str(rank // per_node))
                    summary = os.path.join(tmp, f"{layout}.{rank}.json")
                    procs.append(subprocess.Popen(
                        [GPEMU, "torch", "--clock", "virtual", "--gpu", "a100", "--gpus", str(per_node), "--json",
                         summary, "--", script, os.path.join(tmp, layout)],
                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            errs = [p.communicate(timeout=600)[1] for p in procs]
            for p, err in zip(procs, errs):
                self.assertEqual(p.returncode, 0, err)
            self.assertIn("ranks on 2 nodes of 1 joined by 100gbe", errs[0])  # the summary on stderr
            out = {}
            for layout in ("nodes", "node"):
                with open(os.path.join(tmp, f"{layout}.0")) as f:
                    out[layout] = json.load(f)
                with open(os.path.join(tmp, f"{layout}.1")) as f:
                    # The collectives hold the ranks together.
                    self.assertEqual(json.load(f)["step"], out[layout]["step"])
                with open(os.path.join(tmp, f"{layout}.0.json")) as f:
                    out[layout]["summary"] = json.load(f)
                with open(os.path.join(tmp, f"{layout}.1.json")) as f:
                    # The ranks run the same program on the same card: under the
                    # virtual clock their memory repeats too, whatever the timing
                    # of gloo's threads (a closure that held a tensor once freed
                    # its block late on one rank: 286, 288 or 312 MiB reserved).
                    other = json.load(f)
                for key in ("peak_reserved_mib", "peak_allocated_mib"):
                    self.assertEqual(other[key], out[layout]["summary"][key], (layout, key))
        two, one = out["nodes"], out["node"]
        self.assertEqual((two["summary"]["nodes"], two["summary"]["network"]), (2, "100gbe"))
        self.assertEqual((one["summary"]["nodes"], one["summary"]["network"]), (1, None))
        # Each bucket's all-reduce crosses the network (slower than the A100s' NVSwitch)...
        extra = [t - o for t, o in zip(two["buckets"], one["buckets"])]
        self.assertGreater(min(extra), 0)
        # ...and the DDP step is longer by the network's time: at least the last
        # bucket's extra (it starts after backward), at most all buckets' extras.
        longer = two["step"] - one["step"]
        self.assertGreaterEqual(longer, extra[-1] * 0.999)
        self.assertLessEqual(longer, sum(extra) * 1.001)


class Processes(unittest.TestCase):
    def test_processes_on_one_gpu_are_told_they_do_not_share_it(self):
        # N10: each process of a run emulates its own card; two on cuda:0
        # would each hold a whole one, where a real GPU runs out of memory.
        body = """
import os, sys
import torch.multiprocessing as mp


def child():
    torch.empty(1 << 20, device="cuda:0")


if __name__ == "__main__":
    held = torch.empty(1 << 20, device="cuda:0")
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    p.join()
    print(json.dumps({"pid": os.getpid(), "child": p.pid, "code": p.exitcode}))
"""
        run = run_script_process(body)
        self.assertEqual(run.returncode, 0, run.stderr)
        r = json.loads(run.stdout.strip().splitlines()[-1])
        self.assertEqual(r["code"], 0)
        self.assertIn(f"process {r['child']} allocates on cuda:0, which process {r['pid']} of this run uses too",
                      run.stderr)
        self.assertIn("gpemu serve", run.stderr)
        self.assertEqual(run.stderr.count("do not share an emulated GPU"), 1)


class DeadPeer(unittest.TestCase):
    def test_no_collective_completes_after_a_peer_died(self):
        # N13: rank 0 went on for two more all_reduces after rank 1 died
        # (c10d's Work.wait() does not raise its future's error). The ranks
        # are started as torchrun starts them, so that nothing ends rank 0
        # but gpemu.
        body = RANK_HEAD + """
    t = torch.ones(4, device="cuda")
    for i in range(6):
        dist.all_reduce(t)
        torch.cuda.synchronize()
        with open(f"{out}.{rank}", "w") as f:
            json.dump(dict(done=i), f)
        if rank == 1 and i == 2:
            os._exit(7)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    ranks = [ctx.Process(target=main, args=(r, 2, int(sys.argv[1]), sys.argv[2])) for r in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join()
    print(json.dumps(dict(codes=[p.exitcode for p in ranks])))
"""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rank")
            run = run_script_process(body, "--gpus", "2", script_args=(str(free_port()), out))
            with open(f"{out}.0") as f:
                last = json.load(f)["done"]
        self.assertTrue(run.stdout.strip(), run.stderr)
        codes = json.loads(run.stdout.strip().splitlines()[-1])["codes"]
        self.assertEqual(codes, [1, 7], run.stderr)
        self.assertEqual(last, 2)  # the all_reduce after rank 1's death never completed
        self.assertIn("gpemu torch: rank 0: all_reduce cannot complete: rank 1 (pid", run.stderr)
        self.assertIn("has exited", run.stderr)


class LoaderSpans(unittest.TestCase):
    def test_the_trace_shows_the_scripts_waits_for_its_dataloader(self):
        with tempfile.TemporaryDirectory() as tmp:
            script, trace = os.path.join(tmp, "s.py"), os.path.join(tmp, "trace.json")
            with open(script, "w") as f:
                f.write("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
                        "for (x,) in DataLoader(TensorDataset(torch.zeros(16, 8)), batch_size=4):\n"
                        "    x.cuda()\n")
            # The real clock: under the virtual one a wait for the host takes no emulated time.
            gpemu("torch", "--clock", "real", "--trace", trace, "--", script)
            with open(trace) as f:
                t = json.load(f)
        events = t["traceEvents"] if isinstance(t, dict) else t
        spans = [e for e in events if e.get("name") == "DataLoader next batch"]
        self.assertEqual(len(spans), 5)  # 4 batches and the call that ends the loop
        self.assertTrue(all(e["dur"] > 0 for e in spans))


class Serve(unittest.TestCase):
    """Scripts under `gpemu torch --connect` share a `gpemu serve` GPU: its card, its memory, its
    policy. Asserts what is exact under any timing: memory, errors, the server's process list."""

    def setUp(self):
        if not GPEMU:
            raise unittest.SkipTest("GPEMU_BINARY is not set (ctest sets it)")
        self.tmp = tempfile.TemporaryDirectory()
        self.sock = os.path.join(self.tmp.name, "serve.sock")
        self.server = subprocess.Popen([GPEMU, "serve", "--gpu", "V100-PCIE-16GB", "--policy", "fifo", "--socket",
                                        self.sock], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertTrue(self.wait_for(lambda: os.path.exists(self.sock)), "the server made no socket")

    def tearDown(self):
        self.server.terminate()
        self.server.wait(timeout=60)
        self.tmp.cleanup()

    @staticmethod
    def wait_for(condition, tries=600):
        """Polls `condition` every 50 ms, at most `tries` times (a bound, not a timing assertion)."""
        import time
        for _ in range(tries):
            if condition():
                return True
            time.sleep(0.05)
        return False

    def smi(self):
        return json.loads(gpemu("smi", "--socket", self.sock, "--json").stdout)["gpus"]

    def script(self, name, body):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write("import json, os, sys, time, torch\n" + textwrap.dedent(body))
        return path

    def test_two_scripts_share_the_servers_card_and_memory(self):
        flag, release = os.path.join(self.tmp.name, "holds"), os.path.join(self.tmp.name, "release")
        holder = self.script("holder.py", f"""
            x = torch.empty(10 << 30, dtype=torch.uint8, device="cuda")
            open({flag!r}, "w").close()
            for _ in range(1200):
                if os.path.exists({release!r}):
                    break
                time.sleep(0.05)
            print(json.dumps(dict(allocated=torch.cuda.memory_allocated())))
        """)
        trainer = self.script("trainer.py", """
            out = dict(name=torch.cuda.get_device_name(0))
            try:
                torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
                out["big"] = "fitted"
            except torch.cuda.OutOfMemoryError as e:
                out["big"] = "oom"
            model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                        torch.nn.Linear(16 * 30 * 30, 10)).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            side = torch.cuda.Stream()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(3):
                x = torch.randn(32, 3, 32, 32).pin_memory().cuda(non_blocking=True)
                loss = model(x).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
            end.record()
            with torch.cuda.stream(side):
                y = torch.ones(1024, device="cuda") * 2
            side.synchronize()
            torch.cuda.synchronize()
            out.update(elapsed_ms=start.elapsed_time(end), done=end.query(),
                       allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved())
            print(json.dumps(out))
        """)
        a = subprocess.Popen([GPEMU, "torch", "--connect", "--socket", self.sock, "--", holder],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(self.wait_for(lambda: os.path.exists(flag) or a.poll() is not None), "holder never held")
            self.assertTrue(os.path.exists(flag), a.stderr.read() if a.poll() is not None else "")
            procs = self.smi()[0]["processes"]
            self.assertEqual(len(procs), 1)
            self.assertIn("holder.py", procs[0]["name"])
            self.assertGreaterEqual(procs[0]["memory_bytes"], 10 << 30)
            b = gpemu("torch", "--connect", "--socket", self.sock, "--", trainer, check=False)
            self.assertEqual(b.returncode, 0, b.stderr)
            r = json.loads(b.stdout.strip().splitlines()[-1])
            # 8 GiB fits a 16 GB V100 alone, not beside the holder's 10 GiB.
            self.assertEqual(r["big"], "oom")
            self.assertEqual(r["name"], self.smi()[0]["name"])  # the server's card
            self.assertGreater(r["elapsed_ms"], 0)
            self.assertTrue(r["done"])
            self.assertGreater(r["allocated"], 0)
            self.assertGreaterEqual(r["reserved"], r["allocated"])
        finally:
            open(release, "w").close()
            out, err = a.communicate(timeout=120)
        self.assertEqual(a.returncode, 0, err)
        self.assertGreaterEqual(json.loads(out.strip().splitlines()[-1])["allocated"], 10 << 30)
        # Both processes are gone from the server, their memory with them.
        self.assertTrue(self.wait_for(lambda: self.smi()[0]["processes"] == []), self.smi())
        self.assertEqual(self.smi()[0]["memory_used_bytes"], 0)

    def test_a_script_holds_a_context_only_on_the_gpus_it_uses(self):
        sock = os.path.join(self.tmp.name, "two.sock")
        server = subprocess.Popen([GPEMU, "serve", "--gpu", "V100-PCIE-16GB", "--gpus", "2", "--socket", sock],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.assertTrue(self.wait_for(lambda: os.path.exists(sock)), "the server made no socket")
            script = self.script("second.py", f"""
                x = torch.ones(1000, device="cuda:1")
                smi = json.loads(__import__("subprocess").run([{GPEMU!r}, "smi", "--socket", {sock!r}, "--json"],
                                                              capture_output=True, text=True).stdout)["gpus"]
                print(json.dumps(dict(count=torch.cuda.device_count(), on0=len(smi[0]["processes"]),
                                      on1=len(smi[1]["processes"]), mem0=torch.cuda.memory_allocated(0),
                                      mem1=torch.cuda.memory_allocated(1))))
            """)
            out = gpemu("torch", "--connect", "--socket", sock, "--gpus", "2", "--", script, check=False)
            self.assertEqual(out.returncode, 0, out.stderr)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            self.assertEqual(r, dict(count=2, on0=0, on1=1, mem0=0, mem1=4096))
        finally:
            server.terminate()
            server.wait(timeout=60)

    def test_what_connect_cannot_do_is_refused_before_the_script_runs(self):
        script = self.script("noop.py", "print('ran')\n")
        for options, said in ((["--clock", "virtual"], "--clock virtual"), (["--gpu", "a100"], "--gpu"),
                              (["--gpus", "2"], "has 1 GPU"), (["--trace", os.path.join(self.tmp.name, "t.json")],
                                                               "--trace")):
            out = gpemu("torch", "--connect", "--socket", self.sock, *options, "--", script, check=False)
            self.assertNotEqual(out.returncode, 0, options)
            self.assertIn(said, out.stderr, options)
            self.assertNotIn("ran", out.stdout)
        missing = os.path.join(self.tmp.name, "nobody.sock")
        out = gpemu("torch", "--connect", "--socket", missing, "--", script, check=False)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(missing, out.stderr)
        out = gpemu("torch", "--priority", "3", "--", script, check=False)
        self.assertIn("add --connect", out.stderr)


class BadInput(unittest.TestCase):
    def test_a_torch_built_with_cuda_is_refused_saying_which_builds_work(self):
        r = run_script("""
            import gpemu_torch
            ok = gpemu_torch.supported_torch()
            torch.version.cuda = "12.1"  # as a CUDA build of torch says
            print(json.dumps(dict(ok=ok, refused=gpemu_torch.supported_torch())))
        """)
        self.assertIsNone(r["ok"])
        self.assertIn("built with CUDA 12.1", r["refused"])
        self.assertIn("CPU-only", r["refused"])

    def test_a_missing_script_is_named(self):
        out = gpemu("torch", "--", "/nonexistent/train.py", check=False)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("/nonexistent/train.py", out.stderr)

    def test_an_output_path_in_a_missing_folder_is_refused_before_the_run(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            for flag in ("--json", "--trace", "--report"):
                out = gpemu("torch", flag, "/nonexistent/dir/run.out", "--", f.name, check=False)
                self.assertNotEqual(out.returncode, 0, flag)
                self.assertIn("/nonexistent/dir/run.out", out.stderr, flag)
                self.assertIn(flag, out.stderr)

    def test_an_unknown_gpu_or_model_is_named(self):
        for option, value in (("--gpu", "v1000x"), ("--model", "resnet5000")):
            with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
                out = gpemu("torch", option, value, "--", f.name, check=False)
            self.assertNotEqual(out.returncode, 0, option)
            self.assertIn(value, out.stderr, option)


if __name__ == "__main__":
    unittest.main()
