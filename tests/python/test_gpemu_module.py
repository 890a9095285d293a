"""The Python module `gpemu`: run by ctest (python.module) with PYTHONPATH on the
build tree's module and GPEMU_BINARY naming the `gpemu` program it is compared with.
Times are checked on the emulated timeline (exact), never against the wall clock."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import gpemu

GPEMU = os.environ.get("GPEMU_BINARY")
MIB = 1 << 20


def cli_json(*args, stdin=None):
    if not GPEMU:
        raise unittest.SkipTest("GPEMU_BINARY is not set (ctest sets it)")
    out = subprocess.run([GPEMU, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


class Catalog(unittest.TestCase):
    def test_names_resolve_forgivingly(self):
        v100 = gpemu.gpu("v100")
        self.assertEqual(gpemu.gpu("Tesla_V100-PCIE-32GB")["id"], v100["id"])
        self.assertEqual(v100["architecture"], "Volta")
        ids = [g["id"] for g in gpemu.gpus()]
        self.assertIn(v100["id"], ids)
        self.assertIn(gpemu.gpu("h100")["id"], ids)
        self.assertEqual(gpemu.gpus(), cli_json("devices", "--json"))  # the same dicts, key for key

    def test_unknown_gpu_is_an_input_error_naming_it(self):
        with self.assertRaises(gpemu.InputError) as e:
            gpemu.gpu("v1000x")
        self.assertIn("v1000x", str(e.exception))
        self.assertIsInstance(e.exception, ValueError)
        self.assertIsInstance(e.exception, gpemu.Error)

    def test_models_are_the_zoo(self):
        self.assertIn("resnet50", gpemu.models())
        self.assertIn("bert_base", gpemu.models())
        self.assertTrue(os.path.isdir(os.path.join(gpemu.data_dir(), "zoo")))


class Timeline(unittest.TestCase):
    def setUp(self):
        self.emu = gpemu.Emulator(clock="virtual")
        self.gpu = self.emu.device("v100")

    def test_launch_returns_at_once_and_synchronize_waits(self):
        s = self.gpu.default_stream
        start, end = gpemu.Event(), gpemu.Event()
        s.record(start)
        s.launch_kernel(0.005)
        s.launch_kernel(0.003)
        s.record(end)
        self.assertEqual(self.emu.now(), 0.0)  # nothing blocked the host
        self.assertFalse(end.query())
        s.synchronize()
        self.assertAlmostEqual(self.emu.now(), 0.008, places=12)
        self.assertTrue(end.query())
        self.assertAlmostEqual(start.elapsed_time(end), 8.0, places=9)

    def test_kernels_of_two_streams_share_the_compute_engine(self):
        a, b = self.gpu.create_stream(), self.gpu.create_stream(non_blocking=True)
        ea, eb = gpemu.Event(), gpemu.Event()
        a.launch_kernel(0.004)
        b.launch_kernel(0.004)
        a.record(ea)
        b.record(eb)
        self.assertAlmostEqual(ea.time(), 0.004, places=12)
        self.assertAlmostEqual(eb.time(), 0.008, places=12)

    def test_a_pinned_copy_overlaps_a_kernel_and_takes_the_pcie_time(self):
        pcie = self.gpu.pcie
        nbytes = 64 * MIB
        copy_s = pcie["pinned_latency_s"] + nbytes / (pcie["pinned_gbs"] * 1e9)
        compute, copies = self.gpu.create_stream(), self.gpu.create_stream()
        compute.launch_kernel(0.050)
        t0 = gpemu.Event()
        copies.record(t0)
        copies.copy_h2d(nbytes, pinned=True)
        done = gpemu.Event()
        copies.record(done)
        self.assertEqual(self.emu.now(), 0.0)
        self.assertAlmostEqual(done.time(), copy_s, delta=2e-9)  # not after the 50 ms kernel
        self.assertLess(copy_s, 0.050)

    def test_a_pageable_copy_blocks_the_host(self):
        s = self.gpu.default_stream
        s.copy_h2d(8 * MIB, pinned=False)
        self.assertGreater(self.emu.now(), 0.0)
        self.assertTrue(s.query())

    def test_a_stream_waits_for_another_streams_event(self):
        a, b = self.gpu.create_stream(), self.gpu.create_stream()
        e, done = gpemu.Event(), gpemu.Event()
        a.copy_h2d(16 * MIB)
        a.record(e)
        b.wait(e)
        b.launch_kernel(0.001)
        b.record(done)
        self.assertAlmostEqual(done.time() - e.time(), 0.001, places=12)

    def test_bad_durations_and_sizes_are_input_errors(self):
        s = self.gpu.default_stream
        with self.assertRaisesRegex(gpemu.InputError, "launch_kernel"):
            s.launch_kernel(-1.0)
        with self.assertRaisesRegex(gpemu.InputError, "launch_kernel"):
            s.launch_kernel(float("nan"))
        with self.assertRaisesRegex(gpemu.InputError, "malloc"):
            self.gpu.malloc(-5)

    def test_trace_has_the_kernels(self):
        emu = gpemu.Emulator(clock="virtual", trace=True)
        s = emu.device("a100").default_stream
        s.launch_kernel(0.002, name="my_kernel")
        emu.synchronize()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            emu.write_trace(path)
            with open(path) as f:
                trace = json.load(f)
        names = [e.get("name") for e in trace["traceEvents"]]
        self.assertIn("my_kernel", names)
        with self.assertRaisesRegex(gpemu.InputError, "trace=True"):
            self.emu.write_trace("/nonexistent/t.json")

    def test_the_real_clock_keeps_exact_emulated_times(self):
        emu = gpemu.Emulator(clock="real")
        s = emu.device("v100").default_stream
        a, b = gpemu.Event(), gpemu.Event()
        s.launch_kernel(0.005)  # the host issues the rest while this runs
        s.record(a)
        s.launch_kernel(0.010)
        s.record(b)
        b.synchronize()
        self.assertAlmostEqual(a.elapsed_time(b), 10.0, places=9)
        self.assertEqual(emu.clock, "real")


class Memory(unittest.TestCase):
    def setUp(self):
        self.emu = gpemu.Emulator()
        self.gpu = self.emu.device("v100")

    def test_the_caching_allocators_rules(self):
        p = self.gpu.malloc(1000)
        self.assertEqual(self.gpu.memory_allocated(), 1024)  # 512-byte rounding
        self.assertEqual(self.gpu.memory_reserved(), 2 * MIB)  # a small-pool segment
        self.gpu.free(p)
        self.assertEqual(self.gpu.memory_allocated(), 0)
        self.assertEqual(self.gpu.memory_reserved(), 2 * MIB)  # cached
        self.assertEqual(self.gpu.max_memory_allocated(), 1024)
        self.gpu.empty_cache()
        self.assertEqual(self.gpu.memory_reserved(), 0)
        stats = self.gpu.memory_stats()
        self.assertEqual(stats["num_device_alloc"], 1)
        self.assertEqual(stats["num_device_free"], 1)
        self.assertEqual(stats["allocated_bytes.all.peak"], 1024)

    def test_out_of_memory_reads_like_pytorch(self):
        keep = self.gpu.malloc(self.gpu.capacity // 2)
        with self.assertRaises(gpemu.OutOfMemoryError) as e:
            self.gpu.malloc(self.gpu.capacity // 2 + 64 * MIB)
        self.assertIn("CUDA out of memory", str(e.exception))
        self.assertIsInstance(e.exception, RuntimeError)
        self.assertEqual(self.gpu.memory_stats()["num_ooms"], 1)
        self.gpu.free(keep)

    def test_freeing_what_was_not_allocated_is_a_value_error(self):
        with self.assertRaises(ValueError):
            self.gpu.free(12345)


class Predict(unittest.TestCase):
    def test_same_figures_as_the_cli(self):
        cases = [
            (("v100", "resnet50", 64), {}, ["--gpu", "v100", "--model", "resnet50", "-b", "64"]),
            (("h100", "bert_base", 32), {"precision": "amp", "matmul_precision": "high", "fused": "optimizer"},
             ["--gpu", "h100", "--model", "bert_base", "-b", "32", "--precision", "amp", "--matmul-precision", "high",
              "--fused", "optimizer"]),
            (("a100", "resnet50"), {"max_batch": True}, ["--gpu", "a100", "--model", "resnet50", "--max-batch"]),
            (("h200", "vit_b_16", 32), {"torch": "1", "precision": "amp"},
             ["--gpu", "h200", "--model", "vit_b_16", "-b", "32", "--torch", "1", "--precision", "amp"]),
        ]
        for args, kwargs, flags in cases:
            with self.subTest(flags=flags):
                self.assertEqual(gpemu.predict(*args, **kwargs), cli_json("predict", *flags, "--json"))

    def test_bad_keywords_are_named_as_keywords(self):
        with self.assertRaisesRegex(gpemu.InputError, "matmul_precision"):
            gpemu.predict("v100", "resnet50", 8, matmul_precision="medium-rare")
        with self.assertRaisesRegex(gpemu.InputError, "zero_grad"):
            gpemu.predict("v100", "resnet50", 8, zero_grad="sometimes")
        with self.assertRaisesRegex(gpemu.InputError, "torch '3'"):
            gpemu.predict("v100", "resnet50", 8, torch="3")
        with self.assertRaisesRegex(gpemu.InputError, "host_memory"):
            gpemu.predict("v100", "resnet50", 8, host_memory="shared")
        with self.assertRaisesRegex(gpemu.InputError, "batch-size is required"):
            gpemu.predict("v100", "resnet50")
        with self.assertRaises(gpemu.InputError):
            gpemu.predict("v100", "no_such_model", 8)
        with self.assertRaisesRegex(gpemu.InputError, "attention fused: resnet50 has no fused-attention graph"):
            gpemu.predict("h100", "resnet50", 8, attention="fused")  # said, not run eager
        with self.assertRaisesRegex(gpemu.InputError, "attention fused with fused softmax,layer_norm,gelu"):
            gpemu.predict("h100", "bert_base", 8, task="squad", attention="fused", fused="softmax,layer_norm,gelu")


class Jobs(unittest.TestCase):
    def test_train_gives_the_cli_summary(self):
        ours = gpemu.train(model="resnet18", gpu="v100", batch_size=32, iterations=5)
        cli = cli_json("train", "--synthetic", "-n", "5", "--model", "resnet18", "--gpu", "v100", "-b", "32",
                       "--clock", "virtual", "--json")
        common = set(ours) & set(cli) - {"wall_s"}
        for key in ("elapsed_s", "samples_per_s", "iterations", "peak_allocated_mib", "gpu_util_pct"):
            self.assertIn(key, common)
        for key in sorted(common):
            self.assertEqual(ours[key], cli[key], key)

    def test_train_two_gpus_and_a_fixed_step(self):
        two = gpemu.train(model="resnet18", gpus=2, batch_size=32, iterations=3)
        self.assertEqual(two["gpus"], 2)
        self.assertGreater(two["all_reduce_pct"], 0)
        fixed = gpemu.train(step_time_s=0.25, batch_size=4, iterations=4)
        self.assertAlmostEqual(fixed["elapsed_s"], 1.0, places=6)

    def test_share_gives_the_cli_result(self):
        jobs = [{"name": "a", "model": "resnet18", "batch_size": 32, "iterations": 4},
                {"name": "b", "compute_s": 0.01, "batch_size": 8, "iterations": 6, "arrival_s": 0.005}]
        ours = gpemu.share(jobs, gpu="a100", policy="timeslice")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "jobs.json")
            with open(path, "w") as f:
                json.dump({"jobs": jobs}, f)
            cli = cli_json("share", "--jobs", path, "--gpu", "a100", "--policy", "timeslice", "--clock", "virtual",
                           "--json")
        self.assertEqual(ours, cli)
        self.assertEqual([j["name"] for j in ours["jobs"]], ["a", "b"])

    def test_bad_jobs_name_the_key(self):
        with self.assertRaisesRegex(gpemu.InputError, "colour"):
            gpemu.share([{"model": "resnet18", "colour": "red"}])
        with self.assertRaisesRegex(gpemu.InputError, "iterations"):
            gpemu.train(iterations=0)
        with self.assertRaisesRegex(gpemu.InputError, "timeslice_ms"):
            gpemu.share([{"model": "resnet18"}], policy="timeslice", timeslice_ms=0)

    def test_the_engines_rules_name_the_keyword(self):
        # The engine's error names the spec's field (cluster.gpus); Python says its keyword.
        with self.assertRaises(gpemu.InputError) as e:
            gpemu.train(gpus=0, batch_size=4, iterations=1)
        self.assertEqual(str(e.exception), "gpus 0 is impossible: it must be at least 1")
        with self.assertRaises(gpemu.InputError) as e:
            gpemu.train(gpus=16, batch_size=4, iterations=1)
        self.assertIn("gpus 16 is impossible: a node holds at most 8 GPUs and there is 1 node; give nodes 2 or more "
                      "(and network ", str(e.exception))
        with self.assertRaises(gpemu.InputError) as e:
            gpemu.train(gpus=2, nodes=2, network="", batch_size=4, iterations=1)
        self.assertEqual(str(e.exception), "network is empty: give 10gbe, 25gbe, 100gbe, 400gbe or a JSON file")
        # A jobs list has a jobs file's keys: its dataset is said as 'dataset'.
        with self.assertRaisesRegex(gpemu.InputError, r"job 1 \('job1'\): dataset 'imagenet': unknown"):
            gpemu.share([{"model": "resnet18", "dataset": "imagenet"}])


if __name__ == "__main__":
    unittest.main()


class Serve(unittest.TestCase):
    """Python processes as clients of `gpemu serve`: memory and time of one shared GPU."""

    def setUp(self):
        if not GPEMU:
            raise unittest.SkipTest("GPEMU_BINARY is not set (ctest sets it)")
        self.tmp = tempfile.mkdtemp()
        self.socket = os.path.join(self.tmp, "serve.sock")
        self.server = subprocess.Popen([GPEMU, "serve", "--gpu", "a100", "--policy", "timeslice", "--socket",
                                        self.socket], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(200):  # readiness, not timing: the socket appears when the server listens
            if os.path.exists(self.socket) or self.server.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"])
        self.assertTrue(os.path.exists(self.socket), self.server.stderr.read() if self.server.poll() else "")

    def tearDown(self):
        self.server.terminate()
        self.server.wait(timeout=30)
        self.server.stderr.close()
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_two_clients_share_one_gpus_memory_and_time(self):
        a = gpemu.ServeClient(self.socket, name="job-a")
        b = gpemu.ServeClient(self.socket, name="job-b")
        self.assertEqual(a.gpu["index"], 0)
        self.assertTrue(a.gpu["id"].startswith("A100"))
        room = a.gpu["memory_bytes"]
        big = a.malloc(room * 3 // 4)
        with self.assertRaises(gpemu.OutOfMemoryError) as e:  # what a holds, b cannot have
            b.malloc(room // 2)
        self.assertIn("CUDA out of memory", str(e.exception))
        a.free(big)
        # a's caching allocator keeps the freed segment, as PyTorch's does: still no room for b
        self.assertEqual(a.memory()["allocated_bytes"], 0)
        self.assertGreaterEqual(a.memory()["reserved_bytes"], room * 3 // 4)
        with self.assertRaises(gpemu.OutOfMemoryError):
            b.malloc(room // 2)
        del a  # a process that ends gives its memory back
        for _ in range(200):  # the server notices the closed connection on its own thread
            try:
                b.free(b.malloc(room // 2))
                break
            except gpemu.OutOfMemoryError:
                subprocess.run(["sleep", "0.05"])
        else:
            self.fail("b never got the memory a held")
        # Time: b's kernel alone takes its length; with another's beside it under time-slicing, longer.
        # Timed between events, queued behind a 0.1-s kernel: when the requests reach the server
        # (the host's latency, on a loaded machine) does not move when the timed kernel starts.
        def timed(first_event):
            b.kernel(0.1)
            b.request({"op": "record", "event": first_event})
            b.kernel(0.010)
            b.request({"op": "record", "event": first_event + 1})
            return b.request({"op": "elapsed", "start": first_event, "end": first_event + 1})["ms"] / 1e3

        a = gpemu.ServeClient(self.socket, name="job-a")
        alone = timed(1)
        a.kernel(0.5)  # long enough that b's queued kernels surely meet it
        shared = timed(3)
        self.assertAlmostEqual(alone, 0.010, delta=1e-6)
        self.assertGreater(shared, alone * 1.5)
        names = sorted(p["name"] for p in a.smi()[0]["processes"])
        self.assertEqual(names, ["job-a", "job-b"])

    def test_any_request_of_the_protocol_streams_and_events_included(self):
        c = gpemu.ServeClient(self.socket, name="streams")
        s = c.request({"op": "stream"})["stream"]
        c.request({"op": "kernel", "ns": 20_000_000, "stream": s})
        c.request({"op": "record", "event": 1, "stream": s})
        end = c.request({"op": "event_sync", "event": 1})["end_ns"]
        self.assertGreaterEqual(c.request({"op": "sync", "device": True})["end_ns"], end)
        self.assertTrue(c.request({"op": "query", "event": 1})["done"])
        with self.assertRaises(gpemu.InputError):
            c.request({"op": "wait", "event": 99, "stream": s})

    def test_a_missing_server_is_named(self):
        with self.assertRaises(gpemu.Error) as e:
            gpemu.ServeClient(os.path.join(self.tmp, "none.sock"))
        self.assertIn("none.sock", str(e.exception))


class ClusterPolicies(unittest.TestCase):
    """gpemu.cluster with a policy written in Python (docs/cluster.md), in virtual time."""

    CLUSTER = {"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 4}], "checkpoint_gib": 0}

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.trace = os.path.join(self.dir.name, "t.csv")
        with open(self.trace, "w") as f:
            f.write("job,arrival_s,gpus,iterations,step_s\nlong,0,1,100,1\nshort,5,1,20,1\nlast,5,1,30,1\n")

    def tearDown(self):
        self.dir.cleanup()

    def run_cluster(self, policy, **kw):
        return gpemu.cluster(self.CLUSTER, self.trace, policy=policy, round_s=10, **kw)

    def test_a_python_srtf_runs_as_the_built_in_one(self):
        class Srtf:
            def schedule(self, state):
                jobs = sorted(state["jobs"], key=lambda j: (j["remaining_s"], j["arrival_s"]))
                return [j["id"] for j in jobs]

        ours, builtin = self.run_cluster(Srtf()), self.run_cluster("srtf")
        self.assertEqual(ours["policy"], "Srtf")
        self.assertEqual([j["finish_s"] for j in ours["jobs"]], [j["finish_s"] for j in builtin["jobs"]])
        self.assertEqual(ours["jobs"][1]["finish_s"], 30)  # short: from the round at 10, 20 s

    def test_jobs_left_out_wait(self):
        class ShortFirstAlone:
            def schedule(self, state):
                ids = [j["id"] for j in state["jobs"]]
                return ["short"] if "short" in ids else ids

        run = self.run_cluster(ShortFirstAlone())
        self.assertEqual(run["jobs"][1]["start_s"], 10)
        self.assertEqual(run["jobs"][0]["preemptions"], 1)  # long waited while short ran alone
        self.assertEqual(run["jobs"][2]["start_s"], 120)  # last after long's 90 s left, from 30

        class Nobody:
            def schedule(self, state):
                return []

        with self.assertRaises(gpemu.Error) as e:
            self.run_cluster(Nobody())
        self.assertIn("Nobody left every job waiting", str(e.exception))

    def test_a_policy_that_raises_ends_the_run_with_the_finished_jobs_written(self):
        class Raiser:
            rounds = 0

            def schedule(self, state):
                self.rounds += 1
                if self.rounds == 5:
                    return 1 / 0
                return sorted((j["id"] for j in state["jobs"]), key=lambda i: i != "short")

        out = os.path.join(self.dir.name, "run.json")
        with self.assertRaises(gpemu.Error) as e:
            self.run_cluster(Raiser(), json=out)
        message = str(e.exception)
        self.assertNotIn("\n", message)
        self.assertIn("Raiser.schedule at 40 s raised ZeroDivisionError", message)
        self.assertIn("1 finished jobs' records are written to " + out, message)
        self.assertIsInstance(e.exception.__cause__, ZeroDivisionError)
        with open(out) as f:
            written = json.load(f)
        self.assertEqual(written, e.exception.run)
        self.assertEqual(written["stopped"]["at_s"], 40)
        self.assertEqual(written["jobs"][1]["finish_s"], 30)  # short, finished before the raise

    def test_bad_answers_and_policies_are_named(self):
        class Stranger:
            def schedule(self, state):
                return ["nobody"]

        with self.assertRaises(gpemu.Error) as e:
            self.run_cluster(Stranger())
        self.assertIn("Stranger.schedule at 0 s returned 'nobody', not the id of an active job", str(e.exception))
        with self.assertRaises(gpemu.InputError) as e:
            self.run_cluster(object())
        self.assertIn("schedule(cluster_state)", str(e.exception))
        with self.assertRaises(gpemu.InputError):
            self.run_cluster("lottery")


# Sharing policies written in Python (docs/sharing.md). Registered for the
# process's life, so once each, by name, for every test below.
class CopyOfFifo(gpemu.SharingPolicy):
    def name(self):
        return "test-fifo"

    def exclusive_steps(self):
        return True


class CopyOfMps(gpemu.SharingPolicy):
    def name(self):
        return "test-mps"

    def compute_share(self, options):
        return gpemu.LinkShare(gpemu.ShareRule.Demand)


class CopyOfMig(gpemu.SharingPolicy):
    """src/device/policies/mig.cpp in Python."""

    def name(self):
        return "test-mig"

    def check(self, gpu, options):
        if gpu["id"].startswith("V100"):
            raise ValueError(f"{gpu['id']} has no MIG")

    def slices(self):
        return True

    def kernel_on_slice(self, alone_ns, demand, slice):
        return alone_ns * max(1.0, demand.sm * 7 / slice.compute_sevenths, demand.bw * 8 / slice.memory_eighths)


class HalfWhenShared(gpemu.SharingPolicy):
    """Kernels of the active jobs share the GPU equally, and lose half of it while two or more run."""

    def name(self):
        return "test-half"

    def compute_share(self, options):
        return gpemu.LinkShare(gpemu.ShareRule.TimeSlice, contended_efficiency=0.5)


class RaisesInStep(gpemu.SharingPolicy):
    def name(self):
        return "test-raises-in-step"

    def exclusive_steps(self):  # asked by each job's thread, at each step
        raise RuntimeError("no turn for you")


class RaisesInShare(gpemu.SharingPolicy):
    def name(self):
        return "test-raises-in-share"

    def compute_share(self, options):  # asked once, when the GPU is made
        return 1 / 0


class ReturnsBadShare(gpemu.SharingPolicy):
    def name(self):
        return "test-bad-share"

    def compute_share(self, options):
        return gpemu.LinkShare(gpemu.ShareRule.TimeSlice, contended_efficiency=0)


for _policy in (CopyOfFifo, CopyOfMps, CopyOfMig, HalfWhenShared, RaisesInStep, RaisesInShare, ReturnsBadShare):
    if _policy().name() not in gpemu.sharing_policies():
        gpemu.register_sharing_policy(_policy())  # a temporary: the registry keeps it alive


class SharingPolicies(unittest.TestCase):
    """gpemu.share under a sharing policy written in Python, in virtual time."""

    TWO = [{"name": "a", "compute_s": 0.01, "batch_size": 8, "iterations": 3},
           {"name": "b", "compute_s": 0.01, "batch_size": 8, "iterations": 3}]

    def same_run(self, jobs, gpu, ours, builtin):
        a, b = gpemu.share(jobs, gpu=gpu, policy=ours), gpemu.share(jobs, gpu=gpu, policy=builtin)
        self.assertEqual((a.pop("policy"), b.pop("policy")), (ours, builtin))
        self.assertEqual(a, b)  # every figure, job by job
        return a

    def test_copies_of_built_in_policies_give_their_results(self):
        jobs = [{"name": "a", "model": "resnet18", "batch_size": 16, "iterations": 3},
                {"name": "b", "compute_s": 0.01, "batch_size": 8, "iterations": 4, "arrival_s": 0.002}]
        run = self.same_run(jobs, "a100", "test-fifo", "fifo")
        self.assertTrue(all(j["finished"] for j in run["jobs"]))
        # fifo on two 10 ms jobs: a's steps and b's alternate, a ends 10 ms before b
        fifo = self.same_run(self.TWO, "a100", "test-fifo", "fifo")
        self.assertAlmostEqual(fifo["jobs"][0]["jct_s"], 0.05, places=9)
        self.assertAlmostEqual(fifo["jobs"][1]["jct_s"], 0.06, places=9)
        self.same_run(jobs, "a100", "test-mps", "mps")
        mps = self.same_run(self.TWO, "a100", "test-mps", "mps")  # demands of 1: each kernel at half speed
        self.assertEqual([j["jct_s"] for j in mps["jobs"]], [fifo["jobs"][1]["jct_s"]] * 2)
        for j in jobs:
            j.pop("compute_s", None)
            j.update(model="resnet18", batch_size=16)
        jobs[0]["mig"], jobs[1]["mig"] = "3g.20gb", "2g.10gb"
        mig = self.same_run(jobs, "a100", "test-mig", "mig")
        self.assertGreater(mig["jobs"][1]["jct_s"], mig["jobs"][0]["jct_s"])  # the smaller slice is slower

    def test_a_new_policy_gives_its_own_result(self):
        # Both jobs active from 0: each has half of the half left, so a 10 ms
        # kernel takes 40 ms; three steps, 120 ms, for each job.
        run = gpemu.share(self.TWO, gpu="a100", policy="test-half")
        self.assertEqual(run["policy"], "test-half")
        self.assertEqual([j["finished"] for j in run["jobs"]], [True, True])
        for j in run["jobs"]:
            self.assertAlmostEqual(j["jct_s"], 0.12, places=9)
        self.assertIn("test-half", gpemu.sharing_policies())

    def test_what_a_policy_raises_is_the_runs_error(self):
        run = gpemu.share(self.TWO, gpu="a100", policy="test-raises-in-step")
        self.assertEqual(run["jobs_finished"], 0)
        for j in run["jobs"]:
            self.assertEqual(j["error"], "sharing policy 'test-raises-in-step': its exclusive_steps raised "
                                         "RuntimeError: no turn for you")
        with self.assertRaises(gpemu.Error) as e:
            gpemu.share(self.TWO, gpu="a100", policy="test-raises-in-share")
        self.assertEqual(str(e.exception), "sharing policy 'test-raises-in-share': its compute_share raised "
                                           "ZeroDivisionError: division by zero")
        with self.assertRaisesRegex(gpemu.Error, r"its compute_share returned .*; expected a contended_efficiency"):
            gpemu.share(self.TWO, gpu="a100", policy="test-bad-share")
        # check's ValueError: an input error, as a C++ policy's check gives
        with self.assertRaisesRegex(gpemu.InputError, "'test-mig': its check raised ValueError: V100.* has no MIG"):
            gpemu.share(self.TWO, gpu="v100", policy="test-mig")

    def test_a_taken_name_is_refused(self):
        class Fifo(gpemu.SharingPolicy):
            def name(self):
                return "fifo"

        with self.assertRaises(gpemu.InputError) as e:
            gpemu.register_sharing_policy(Fifo())
        self.assertNotIn("\n", str(e.exception))
        self.assertIn("sharing policy 'fifo' is registered already", str(e.exception))
        with self.assertRaisesRegex(gpemu.InputError, "not a gpemu.SharingPolicy"):
            gpemu.register_sharing_policy(object())
        self.assertEqual(gpemu.sharing_policies().count("fifo"), 1)


# Placement policies written in Python, and the Session they place jobs of
# (docs/python.md). Registered for the process's life, so once, by name.
class CopyOfFirstFit(gpemu.PlacementPolicy):
    """src/workload/placement/first_fit.cpp in Python."""

    def name(self):
        return "test-first-fit"

    def place(self, job, gpus):
        if job.gpu >= 0:
            return job.gpu if gpus[job.gpu].jobs == 0 else -1
        for g in gpus:
            if g.jobs == 0:
                return g.index
        return -1


class HighestFree(gpemu.PlacementPolicy):
    """Each job alone on the highest-numbered free GPU."""

    def name(self):
        return "test-highest-free"

    def place(self, job, gpus):
        free = [g.index for g in gpus if g.jobs == 0]
        return free[-1] if free else -1


class RaisesInPlace(gpemu.PlacementPolicy):
    def __init__(self, error):
        super().__init__()
        self.error = error

    def name(self):
        return "test-raises-in-place"

    def place(self, job, gpus):
        raise self.error


class ReturnsNoGpu(gpemu.PlacementPolicy):
    def name(self):
        return "test-no-gpu"

    def place(self, job, gpus):
        return len(gpus)  # one past the last


if "test-first-fit" not in gpemu.placement_policies():
    gpemu.register_placement_policy(CopyOfFirstFit())  # a temporary: the registry keeps it alive


def fixed(name, steps, arrival_s=0.0, **keys):
    """A job of `steps` steps of 10 ms of GPU time each and nothing else."""
    return dict(name=name, compute_s=0.01, batch_size=8, iterations=steps, arrival_s=arrival_s, **keys)


class Sessions(unittest.TestCase):
    """gpemu.Session in virtual time, its jobs placed by built-in policies and ones written in Python."""

    JOBS = [fixed("a", 10), fixed("b", 20), fixed("c", 5), fixed("d", 30), fixed("e", 4),
            fixed("f", 3, arrival_s=0.06), fixed("g", 6, arrival_s=0.01, gpu=3),
            fixed("h", 4, arrival_s=0.02, gpus=2)]

    def run_jobs(self, placement, jobs=JOBS, **options):
        s = gpemu.Session("a100", gpus_per_node=4, policy="timeslice", placement=placement, **options)
        for j in jobs:
            s.add_job(j)
        s.run()
        return s.outcomes()

    def test_a_python_copy_of_first_fit_places_as_the_built_in_one(self):
        builtin = self.run_jobs("first-fit")
        self.assertEqual(self.run_jobs(CopyOfFirstFit()), builtin)  # an object of its own
        self.assertEqual(self.run_jobs("test-first-fit"), builtin)  # the registered one, by name
        self.assertTrue(all(o["state"] == "finished" for o in builtin))
        # By hand: a to d on GPUs 0 to 3 at 0; e on c's GPU 2 at 50 ms; g waits
        # for its GPU 3 (d's, 300 ms); h for two free GPUs, while f, queued
        # behind it, takes GPU 2 at 90 ms: GPUs 0 (free at 100 ms) and 2 (at 120 ms).
        self.assertEqual([o["gpus"] for o in builtin], [[0], [1], [2], [3], [2], [2], [3], [0, 2]])
        for o, start in zip(builtin, [0, 0, 0, 0, 0.05, 0.09, 0.3, 0.12]):
            self.assertAlmostEqual(o["start_s"], start, places=9, msg=o["name"])

    def test_a_different_python_policy_gives_its_own_placement(self):
        # By hand (steps of 10 ms; highest free GPU first): a, b, c, d start at
        # 0 on GPUs 3, 2, 1, 0; e waits for c's end (50 ms) on GPU 1, f for
        # e's (90 ms) there too.
        jobs = [fixed("a", 10), fixed("b", 20), fixed("c", 5), fixed("d", 30), fixed("e", 4),
                fixed("f", 3, arrival_s=0.06)]
        out = self.run_jobs(HighestFree(), jobs)
        self.assertEqual([o["gpus"] for o in out], [[3], [2], [1], [0], [1], [1]])
        for o, start, end in zip(out, [0, 0, 0, 0, 0.05, 0.09], [0.1, 0.2, 0.05, 0.3, 0.09, 0.12]):
            self.assertAlmostEqual(o["start_s"], start, places=9, msg=o["name"])
            self.assertAlmostEqual(o["end_s"], end, places=9, msg=o["name"])
        self.assertAlmostEqual(out[5]["jct_s"], 0.06, places=9)  # arrived at 60 ms
        self.assertEqual([o["gpus"] for o in self.run_jobs("first-fit", jobs)][:5], [[0], [1], [2], [3], [2]])

    def test_what_a_placement_policy_raises_is_the_runs_error(self):
        for error, kind, text in [(RuntimeError("no GPU for you"), gpemu.Error, "RuntimeError: no GPU for you"),
                                  (ValueError("bad job"), gpemu.InputError, "ValueError: bad job")]:
            s = gpemu.Session("a100", gpus_per_node=2, placement=RaisesInPlace(error))
            s.add_job(fixed("a", 3))
            s.add_job(fixed("b", 3, arrival_s=0.01))
            with self.assertRaises(kind) as e:
                s.run()
            self.assertEqual(str(e.exception), f"placement policy 'test-raises-in-place': its place raised {text}")
            with self.assertRaisesRegex(gpemu.Error, "the run failed .*; it has no outcomes"):
                s.outcomes()
        s = gpemu.Session("a100", gpus_per_node=2, placement=ReturnsNoGpu())
        s.add_job(fixed("a", 3))
        with self.assertRaisesRegex(gpemu.Error, r"'test-no-gpu': its place returned 2; expected a GPU index from 0 "
                                                 r"to 1, or -1 to keep the job queued"):
            s.run()
        with self.assertRaisesRegex(gpemu.InputError, "written in Python: it runs under clock='virtual' only"):
            gpemu.Session(placement=HighestFree(), clock="real")

    def test_a_taken_name_is_refused(self):
        class FirstFit(CopyOfFirstFit):
            def name(self):
                return "first-fit"

        with self.assertRaises(gpemu.InputError) as e:
            gpemu.register_placement_policy(FirstFit())
        self.assertNotIn("\n", str(e.exception))
        self.assertIn("placement policy 'first-fit' is registered already", str(e.exception))
        with self.assertRaisesRegex(gpemu.InputError, "placement policy 'test-first-fit' is registered already"):
            gpemu.register_placement_policy(CopyOfFirstFit())
        with self.assertRaisesRegex(gpemu.InputError, "not a gpemu.PlacementPolicy"):
            gpemu.register_placement_policy(object())
        self.assertEqual(gpemu.placement_policies()[:2], ["pinned", "first-fit"])
        self.assertEqual(gpemu.placement_policies().count("test-first-fit"), 1)
        with self.assertRaisesRegex(gpemu.InputError, "placement policy 'round-robin' is not known; expected pinned, "
                                                      "first-fit"):
            gpemu.Session(placement="round-robin")

    def test_a_session_gives_shares_figures_for_shares_jobs(self):
        jobs = [{"name": "a", "model": "resnet18", "batch_size": 32, "iterations": 4},
                {"name": "b", "compute_s": 0.01, "batch_size": 8, "iterations": 6, "arrival_s": 0.005}]
        shared = gpemu.share(jobs, gpu="a100", policy="timeslice")
        s = gpemu.Session("a100", policy="timeslice")
        self.assertEqual([s.add_job(j) for j in jobs], [0, 1])
        s.run()
        for ours, theirs in zip(s.outcomes(), shared["jobs"]):
            self.assertEqual({k: ours[k] for k in theirs}, theirs)
            self.assertEqual((ours["gpus"], ours["state"]), ([0], "finished"))
        self.assertAlmostEqual(s.outcome(1)["start_s"], 0.005, places=9)  # pinned: at its arrival

    def test_callbacks_pause_and_resume_and_what_they_raise_is_the_runs_error(self):
        s = gpemu.Session("a100")
        a = s.add_job(fixed("a", 10))
        s.add_job(name="b", compute_s=0.01, batch_size=8, iterations=2, after="a")
        s.at(0.025, lambda session: session.pause(a))  # stops before its 4th step, at 30 ms
        s.at(0.1, lambda session: session.resume(a))
        ended = []
        s.on_job_end(lambda session, o: ended.append((o["name"], o["state"], round(o["end_s"], 9))))
        s.run()
        [pause] = s.outcome(a)["pauses"]
        self.assertAlmostEqual(pause.pop("from_s"), 0.03, places=9)
        self.assertAlmostEqual(pause.pop("to_s"), 0.1, places=9)
        self.assertEqual(pause, {"preempted": False})
        self.assertEqual(ended, [("a", "finished", 0.17), ("b", "finished", 0.19)])
        self.assertEqual(s.state(a), "finished")
        with self.assertRaisesRegex(gpemu.Error, "while the session runs"):
            s.pause(a)

        s = gpemu.Session("a100")
        s.add_job(fixed("a", 10))
        s.at(0.05, lambda session: 1 / 0)
        with self.assertRaises(gpemu.Error) as e:
            s.run()
        self.assertEqual(str(e.exception), "Session: the action at 0.05 s raised ZeroDivisionError: division by zero")
        self.assertIsInstance(e.exception.__cause__, ZeroDivisionError)
        self.assertAlmostEqual(s.outcome(0)["end_s"], 0.1, places=9)  # the run went on to its end

    def test_the_docs_example_prints_what_the_docs_say(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")) as f:
            doc = f.read()
        section = doc[doc.index("## A session: jobs over time"):]
        code = section.split("```python\n", 1)[1].split("```", 1)[0]
        printed = section.split("prints\n\n```\n", 1)[1].split("```", 1)[0]
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        self.assertEqual(out.stdout, printed)

    def test_bad_jobs_name_the_key(self):
        s = gpemu.Session("a100", gpus_per_node=2)
        with self.assertRaisesRegex(gpemu.InputError, "'colour'.*and a session's: gpu, gpus"):
            s.add_job(fixed("a", 1, colour="red"))
        with self.assertRaisesRegex(gpemu.InputError, r"job 0, 'gpu' is 2: expected an integer from -1 to 1"):
            s.add_job(fixed("a", 1, gpu=2))
        with self.assertRaisesRegex(gpemu.InputError, r"'after' is \"x\": expected an earlier job's id or name"):
            s.add_job(fixed("a", 1, after="x"))
        s.add_job(fixed("a", 1))
        with self.assertRaisesRegex(gpemu.InputError, "name 'a' is job 0's"):
            s.add_job(fixed("a", 1))
        with self.assertRaisesRegex(gpemu.InputError, r"^Session.add_job: job 1 \('x'\): unknown model 'nonexistent'"):
            s.add_job(name="x", model="nonexistent")
        with self.assertRaisesRegex(gpemu.InputError, r"^Session.add_job: job 1 \('y'\), 'iterations' is 0"):
            s.add_job(fixed("y", 0))
        with self.assertRaisesRegex(gpemu.Error, "there are none before run"):
            s.outcomes()
