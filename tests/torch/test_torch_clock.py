"""`gpemu torch`: the script's own clocks, its steps, the summary it prints,
the trace and the host's cost per op (docs/torch.md).

Run by ctest (python.torch, with test_torch_backend.py). Times are the
emulated timeline's (exact) under --clock virtual."""
import json
import os
import tempfile
import unittest

from test_torch_backend import gpemu, run_script


def run_with_outputs(body, *options):
    """Runs `body` (a whole script) under gpemu torch --clock virtual with
    --json and --trace; returns (the summary, the trace's events, stdout, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        script, summary, trace = (os.path.join(tmp, n) for n in ("s.py", "run.json", "trace.json"))
        with open(script, "w") as f:
            f.write(body)
        out = gpemu("torch", "--clock", "virtual", "--json", summary, "--trace", trace, *options, "--", script,
                    check=False)
        if out.returncode != 0:
            raise AssertionError(f"script failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        with open(summary) as f:
            s = json.load(f)
        with open(trace) as f:
            t = json.load(f)
    return s, t["traceEvents"], out.stdout, out.stderr


class ScriptClocks(unittest.TestCase):
    def test_the_scripts_clocks_read_emulated_time(self):
        r = run_script("""
            import datetime, time
            m = torch.nn.Linear(1024, 1024).cuda()
            x = torch.randn(512, 1024, device="cuda")
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            def step():
                loss = m(x).sum()
                loss.backward()
                opt.step()
                opt.zero_grad()
                return loss.item()
            step(); step()
            p0, t0, m0, d0, n0 = (time.perf_counter(), time.time(), time.monotonic_ns(), datetime.datetime.now(),
                                  time.perf_counter_ns())
            for _ in range(10):
                step()
            p1, t1, m1, d1, n1 = (time.perf_counter(), time.time(), time.monotonic_ns(), datetime.datetime.now(),
                                  time.perf_counter_ns())
            real0 = time.clock_gettime(time.CLOCK_MONOTONIC)
            time.sleep(5)
            real1 = time.clock_gettime(time.CLOCK_MONOTONIC)
            p2 = time.perf_counter()
            # Library code keeps the real clocks: multiprocessing's wait computes
            # its deadline with time.monotonic, which on emulated time would
            # never pass (SIGALRM ends the script instead of hanging).
            import multiprocessing.connection, signal
            signal.alarm(60)
            multiprocessing.connection.wait([], timeout=0.05)
            signal.alarm(0)
            s = json.loads(torch.ops.gpemu.summary())
            print(json.dumps(dict(perf=(p1 - p0) / 10, wall=(t1 - t0) / 10, mono=(m1 - m0) / 10e9,
                                  perf_ns=(n1 - n0) / 10e9, dt=(d1 - d0).total_seconds() / 10,
                                  is_datetime=isinstance(d0, datetime.datetime), year=d0.year,
                                  median=s["steps"]["median_ms"] / 1e3, source=s["steps"]["source"],
                                  slept=p2 - p1, real_sleep=real1 - real0, emulated=torch.ops.gpemu.now())))
        """, "--gpu", "h100")
        # The script's own step time is the emulated one: every step alike, so
        # 10 steps over 10 is the median of the runtime's step times.
        self.assertEqual(r["source"], "optimizer.step() calls")
        self.assertGreater(r["median"], 1e-4)
        for k in ("perf", "wall", "mono", "perf_ns", "dt"):
            self.assertAlmostEqual(r[k], r["median"], delta=r["median"] * 1e-5 + 2e-6, msg=k)
        self.assertTrue(r["is_datetime"])
        self.assertGreaterEqual(r["year"], 2024)  # time.time() starts at the real time
        # time.sleep(5) moves the emulated clock on by 5 s and returns at once
        # (a real 5 s sleep could not take less than 5 s).
        self.assertAlmostEqual(r["slept"], 5.0, places=6)
        self.assertLess(r["real_sleep"], 5.0)
        self.assertGreater(r["emulated"], 5.0)

    def test_the_scripts_c_code_reads_emulated_time(self):
        probe = os.environ.get("GPEMU_CLOCK_PROBE")
        if not probe or not os.path.exists(probe):
            self.skipTest("the C probe library is built with the torch backend (GPEMU_CLOCK_PROBE unset)")
        r = run_script(f"""
            import ctypes, time
            c = ctypes.CDLL({probe!r})
            c.probe_monotonic_ns.restype = c.probe_gettimeofday_ns.restype = ctypes.c_longlong
            c.probe_nanosleep.argtypes = (ctypes.c_longlong,)
            m = torch.nn.Linear(1024, 1024).cuda()
            x = torch.randn(512, 1024, device="cuda")
            m(x).sum().item()
            c0, g0, p0 = c.probe_monotonic_ns(), c.probe_gettimeofday_ns(), time.monotonic_ns()
            real0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            for _ in range(5):
                m(x).sum().item()
            c.probe_nanosleep(3_000_000_000)
            c1, g1, p1, t1 = c.probe_monotonic_ns(), c.probe_gettimeofday_ns(), time.monotonic_ns(), time.time()
            real1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            print(json.dumps(dict(c=(c1 - c0) / 1e9, g=(g1 - g0) / 1e9, p=(p1 - p0) / 1e9, real=(real1 - real0) / 1e9,
                                  same=abs(c0 - p0) / 1e9, wall=g1 / 1e9 - t1)))
        """, "--gpu", "v100")
        # The C code's clocks are the Python ones: the 5 steps' emulated time
        # plus the 3 s its nanosleep moved them on, which took no real 3 s.
        self.assertGreater(r["p"], 3.0)
        self.assertAlmostEqual(r["c"], r["p"], delta=1e-3)
        self.assertAlmostEqual(r["g"], r["p"], delta=1e-3)
        self.assertLess(r["same"], 1e-3)
        self.assertLess(abs(r["wall"]), 1.0)
        self.assertLess(r["real"], 3.0)

    def test_dataloader_workers_keep_the_real_clocks(self):
        r = run_script("""
            import time
            from torch.utils.data import DataLoader, Dataset
            class Clocks(Dataset):
                def __len__(self):
                    return 2
                def __getitem__(self, i):
                    return torch.tensor([time.time()], dtype=torch.float64)
            time.sleep(1000)  # the script's emulated time runs 1000 s ahead of the real time
            ahead = time.time()
            worker = [float(b[0, 0]) for b in DataLoader(Clocks(), num_workers=1)]
            print(json.dumps(dict(ahead=ahead, worker=worker, real=time.clock_gettime(time.CLOCK_REALTIME))))
        """)
        # The worker's work is real: its time.time() is the real one.
        for t in r["worker"]:
            self.assertLess(abs(t - r["real"]), 500)
            self.assertGreater(r["ahead"] - t, 500)

    def test_the_real_clock_keeps_real_time(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "s.py")
            with open(script, "w") as f:
                f.write("import json, time, torch\n"
                        "real = time.clock_gettime(time.CLOCK_MONOTONIC)\n"
                        "mono = time.monotonic()\n"
                        "time.sleep(0.01)\n"
                        "print(json.dumps(dict(gap=abs(mono - real), slept=time.monotonic() - mono,\n"
                        "                      real=time.sleep.__module__)))\n")
            r = json.loads(gpemu("torch", "--clock", "real", "--", script).stdout)
        self.assertLess(r["gap"], 1.0)  # one clock read twice: time.monotonic is CLOCK_MONOTONIC
        self.assertGreaterEqual(r["slept"], 0.01)  # a real sleep
        self.assertEqual(r["real"], "time")  # not replaced


class Steps(unittest.TestCase):
    LOOP = ("import torch\n"
            "x = torch.randn(256, 512, device='cuda')\n"
            "w = torch.randn(512, 512, device='cuda', requires_grad=True)\n"
            "def train_step():\n"
            "    for _ in range(2):  # two micro-batches: two backward calls per step\n"
            "        (x @ w).sum().backward()\n"
            "    with torch.no_grad():\n"
            "        w.sub_(0.1 * w.grad)\n"
            "        w.grad.zero_()\n"
            "    return w.sum().item()\n"
            "for _ in range(4):\n"
            "    train_step()\n")

    def test_a_hand_written_update_loop_has_steps_from_its_backward_calls_and_a_summary(self):
        s, _, out, err = run_with_outputs(self.LOOP, "--gpu", "a100")
        self.assertEqual(s["optimizer_steps"], 0)
        self.assertEqual(s["iterations"], 8)  # one per backward call
        self.assertEqual(s["steps"]["source"], "backward calls")
        self.assertEqual(len(s["steps"]["step_ms"]), 7)
        self.assertGreater(s["forward_ms_mean"], 0)
        self.assertGreater(s["backward_ms_mean"], 0)
        self.assertIsNone(s["host_load_delay_s"])  # virtual clock: no load to make up
        # The summary on stderr says what was emulated; the script's own output is untouched.
        self.assertEqual(out, "")
        self.assertIn("gpemu torch: 1x ", err)
        self.assertIn("A100", err)
        self.assertIn("virtual clock, host h200-2026", err)
        self.assertIn(f"{s['steps']['median_ms']:.3f} ms median", err)
        self.assertIn("over 8 steps (backward calls)", err)
        self.assertIn(f"{s['peak_allocated_mib']:.1f} MiB allocated", err)
        self.assertIn(f"GPU busy {s['gpu_util_pct']:.1f} %", err)
        self.assertIn(f"kernels      {s['kernels']},", err)
        self.assertRegex(err, r"model error  \+-\d+ % per step expected")

    def test_a_step_marker_may_name_a_record_function_label(self):
        r = run_script("""
            x = torch.randn(64, 64, device="cuda", requires_grad=True)
            for _ in range(3):
                with torch.profiler.record_function("my_step"):
                    (x @ x).sum().backward()
                    (x @ x).sum().backward()
                    x.grad = None
                    torch.cuda.synchronize()
            print(json.dumps(json.loads(torch.ops.gpemu.summary())["steps"]))
        """, "--step-marker", "my_step")
        self.assertEqual(r["source"], "step marker")
        self.assertEqual(r["count"], 3)  # not the 6 backward calls

    def test_a_step_marker_names_the_function_called_once_per_step(self):
        s, _, _, err = run_with_outputs(self.LOOP, "--step-marker", "train_step")
        self.assertEqual(s["iterations"], 4)
        self.assertEqual(s["steps"]["source"], "step marker")
        steps = s["steps"]["step_ms"]
        self.assertEqual(len(steps), 3)
        # The first step makes the gradient; the others are alike, so the
        # median is their time.
        self.assertAlmostEqual(steps[1], steps[2], places=9)
        self.assertAlmostEqual(s["steps"]["median_ms"], steps[2], places=9)
        self.assertEqual(s["steps"]["min_ms"], min(steps))
        self.assertEqual(s["steps"]["max_ms"], max(steps))
        self.assertLess(sum(steps) / 1e3, s["elapsed_s"])
        self.assertIn("over 4 steps (step marker)", err)


class WordLanguageModel(unittest.TestCase):
    def test_an_lstm_language_model_with_manual_updates_prints_the_emulated_step_time(self):
        # pytorch/examples' word_language_model, its shape: an LSTM over
        # bptt-long slices, a hand-written SGD update, time.time() per log interval.
        r = run_script("""
            import time
            import torch.nn as nn
            import torch.nn.functional as F
            class RNNModel(nn.Module):
                def __init__(self, ntoken=1000, ninp=64, nhid=64, nlayers=2):
                    super().__init__()
                    self.drop = nn.Dropout(0.2)
                    self.encoder = nn.Embedding(ntoken, ninp)
                    self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
                    self.decoder = nn.Linear(nhid, ntoken)
                def forward(self, x, hidden):
                    out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
                    return F.log_softmax(self.decoder(self.drop(out)), dim=-1), hidden
            bptt, batch, lr = 35, 20, 20.0
            model, criterion = RNNModel().cuda(), nn.NLLLoss()
            data = torch.randint(0, 1000, (bptt * 12 + 1, batch)).cuda()
            hidden = tuple(torch.zeros(2, batch, 64, device="cuda") for _ in range(2))
            model.train()
            intervals, total_loss, start = [], 0.0, time.time()
            for n, i in enumerate(range(0, bptt * 12, bptt)):
                x, y = data[i:i + bptt], data[i + 1:i + 1 + bptt].reshape(-1)
                hidden = tuple(h.detach() for h in hidden)
                model.zero_grad()
                output, hidden = model(x, hidden)
                loss = criterion(output.view(-1, 1000), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
                total_loss += loss.item()
                if n % 4 == 3:
                    intervals.append((time.time() - start) * 1000 / 4)
                    start = time.time()
            s = json.loads(torch.ops.gpemu.summary())
            print(json.dumps(dict(ms_per_batch=intervals, steps=s["steps"], kernels=s["kernels"])))
        """, "--gpu", "h100")
        self.assertEqual(r["steps"]["source"], "backward calls")
        self.assertEqual(r["steps"]["count"], 12)
        # After the first interval (the first batch makes the gradients), the
        # script's own ms/batch is the emulated step time.
        for ms in r["ms_per_batch"][1:]:
            self.assertAlmostEqual(ms, r["steps"]["median_ms"], delta=r["steps"]["median_ms"] * 1e-5)
        self.assertGreater(r["kernels"], 12 * 100)  # the LSTM's time steps and gates, from C++


class Trace(unittest.TestCase):
    def test_each_kernel_is_drawn_once_with_its_shapes_bytes_and_phase(self):
        _, events, _, _ = run_with_outputs(
            "import torch\n"
            "a = torch.ones(256, 128, device='cuda', requires_grad=True)\n"
            "b = torch.ones(128, 64, device='cuda')\n"
            "s = torch.cuda.Stream()\n"
            "with torch.cuda.stream(s):\n"
            "    (a @ b).sum().backward()\n"
            "torch.cuda.synchronize()\n")
        mm = [e for e in events if e.get("ph") == "X" and e["name"] == "mm"]
        self.assertEqual(len(mm), 2)  # forward a @ b, backward grad @ b.T: once each
        fwd = next(e for e in mm if e["args"]["phase"] == "forward")
        bwd = next(e for e in mm if e["args"]["phase"] == "backward")
        self.assertEqual(fwd["args"]["shapes"], "[256,128] [128,64] -> [256,64]")
        self.assertEqual(bwd["args"]["shapes"], "[256,64] [64,128] -> [256,128]")
        # mm's bytes as the cost model counts them: both inputs read and the
        # output written, 4 bytes each (mm reaches the backend as mm.out: its
        # out= argument is written, not read)
        self.assertEqual(fwd["args"]["bytes"], 4 * (256 * 128 + 128 * 64 + 256 * 64))
        # backward: sum's gradient is one element broadcast (stride 0: 4 bytes)
        self.assertEqual(bwd["args"]["bytes"], 4 * (1 + 64 * 128 + 256 * 128))
        # one track per stream; no kernel on the engine tracks too
        tids = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"}
        self.assertTrue(all(tid >= 100 for _, tid in tids), tids)


class HostProfile(unittest.TestCase):
    def host_file(self, tmp):
        path = os.path.join(tmp, "host.json")
        with open(path, "w") as f:
            json.dump(dict(format="gpemu-host/1", name="test-host", forward_us=100, backward_us=10, optimizer_us=50,
                           foreach_us=50, view_us=0, sync_us=20), f)
        return path

    def test_the_host_profile_prices_each_op_and_cpp_loops_pay_the_cpp_rate(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run_script("""
                t = torch.zeros(16, device="cuda")
                lstm = torch.nn.LSTM(32, 32, num_layers=2).cuda()
                x = torch.zeros(20, 4, 32, device="cuda")
                hx = (torch.zeros(2, 4, 32, device="cuda"), torch.zeros(2, 4, 32, device="cuda"))
                torch.cuda.synchronize()
                def kernels():
                    return json.loads(torch.ops.gpemu.summary())["kernels"]
                t0 = torch.ops.gpemu.now()
                for _ in range(50):
                    t.add_(1)
                t1, k1 = torch.ops.gpemu.now(), kernels()
                lstm(x, hx)
                t2, k2 = torch.ops.gpemu.now(), kernels()
                ln = torch.nn.LayerNorm(32).cuda()
                k3 = kernels()
                ln(x)
                k4 = kernels()
                print(json.dumps(dict(adds=t1 - t0, lstm=t2 - t1, lstm_kernels=k2 - k1, layer_norm_kernels=k4 - k3,
                                      host=json.loads(torch.ops.gpemu.summary())["host_profile"])))
            """, "--host", self.host_file(tmp))
        self.assertEqual(r["host"], "test-host")
        self.assertAlmostEqual(r["adds"], 50 * 100e-6, places=9)
        # _VF.lstm issues its kernels from C++: its first pays the Python rate, the rest the C++ one
        self.assertGreater(r["lstm_kernels"], 20)
        self.assertAlmostEqual(r["lstm"], 100e-6 + (r["lstm_kernels"] - 1) * 10e-6, places=9)
        # layer norm is one fused kernel, as on CUDA (torch 1.13 alone would issue batch norm and addcmul)
        self.assertEqual(r["layer_norm_kernels"], 1)

    def test_a_bad_host_or_step_marker_is_named(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            out = gpemu("torch", "--host", "no-such-host", "--", f.name, check=False)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("--host 'no-such-host'", out.stderr)
            self.assertIn("h200-2026", out.stderr)
            out = gpemu("torch", "--step-marker", "train step()", "--", f.name, check=False)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("--step-marker 'train step()'", out.stderr)


if __name__ == "__main__":
    unittest.main()
