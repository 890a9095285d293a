#!/usr/bin/env python3
"""Real nodes against modelled nodes (issue 32): the same 2-node data-parallel job run twice.

Real: `gpemu netns up --nodes 2 --bandwidth RATE` (root), then one `gpemu train --clock real` per namespace with
torchrun's variables (RANK, WORLD_SIZE=2, MASTER_ADDR=node 0's address), so each step's network all-reduce is a real
gloo ring over the shaped veth links. Modelled: `gpemu train --clock virtual --nodes 2 --gpus-per-node 1 --network
FILE` with a NIC of the same rate, the payload fraction TCP leaves of each frame HTB counts (1448 / 1514: a 1500-byte
MTU with TCP timestamps, the Ethernet header; HTB does not count the preamble and gap) and the veth's latency.
Printed: each run's mean step time and epoch time, and their ratios (issue 32: within 10 %).

  sudo bench/realnodes_agreement.py [--gpemu build/gpemu] [--bandwidth 1Gbit] [--steps 8] [--model resnet18]

measure() is also repro/realnodes's (run_all.sh --full), which judges the ratios by the suite's rules.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PREFIX = "gpemuagr"
# What a rank of a gpemu built without libgloo-dev says (src/dist/node_group.cpp).
NO_GLOO = "was built without gloo"


class CannotRun(Exception):
    """This machine cannot run the real half: not root, no iproute2, namespaces refused, gpemu without gloo."""


def netns_refused(prefix):
    """Why this machine cannot make the namespaces ('' when it can): the checks of gpemu's own tests
    (netns::netns_refused in src/netns/netns.cpp), so a refusal is told apart from a failing `gpemu netns up`."""
    if os.geteuid() != 0:
        return "needs root to make network namespaces"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "needs iproute2's ip and tc on PATH"
    probe = subprocess.run(["ip", "netns", "add", f"{prefix}-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"this machine refuses `ip netns add`: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"{prefix}-probe"], capture_output=True)
    return ""


class Runs:
    """The gpemu commands run, each with its wall time (repro's inputs.json records them)."""

    def __init__(self):
        self.log = []

    def __call__(self, cmd, label):
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        self.log.append({"label": label, "command": " ".join(cmd[1:]), "wall_s": time.monotonic() - start})
        if proc.returncode != 0:
            raise RuntimeError(f"{label} failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()}")
        return proc.stdout


def run_real(gpemu, job, bandwidth, prefix, runs, timeout_s):
    """Two `gpemu train --clock real` ranks, one in each of two shaped namespaces; returns (netns up's JSON,
    each rank's JSON). The namespaces are taken down and no rank is left running, whatever happens."""
    procs = []
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's kill still cleans up
    try:  # down even after a failed up: it removes whatever up made before failing, or says nothing was there
        up = json.loads(runs([gpemu, "netns", "up", "--nodes", "2", "--bandwidth", bandwidth, "--prefix", prefix,
                              "--json"], "netns up"))
        master = up["nodes"][0]["address"]
        with socket.socket() as s:  # a port for the rendezvous (rank 0 listens inside its namespace)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        start = time.monotonic()
        for rank, node in enumerate(up["nodes"]):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR=master,
                       MASTER_PORT=str(port))
            cmd = ["ip", "netns", "exec", node["netns"], gpemu, *job, "--clock", "real"]
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # no pipe to fill while waiting
            procs.append((cmd, subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True), out, err))
        # Wait for all, and stop at the first that fails: its message says why (the others' only that it went).
        wall = {}
        while len(wall) < len(procs) and all(p.returncode in (None, 0) for _, p, _, _ in procs):
            if time.monotonic() - start > timeout_s:
                raise RuntimeError(f"the real ranks did not finish within {timeout_s} s")
            time.sleep(0.05)
            for rank, (_, p, _, _) in enumerate(procs):
                if rank not in wall and p.poll() is not None:
                    wall[rank] = time.monotonic() - start

        def said(f):
            f.seek(0)
            return f.read().strip()

        for rank, (_, p, _, err) in enumerate(procs):
            if p.returncode not in (None, 0):
                if NO_GLOO in said(err):
                    raise CannotRun(said(err).splitlines()[-1])
                raise RuntimeError(f"real rank {rank} failed ({p.returncode}): {said(err)}")
        for rank, (cmd, _, _, _) in enumerate(procs):
            runs.log.append({"label": f"real rank {rank}", "command": " ".join(cmd), "wall_s": wall[rank]})
        real = [json.loads(said(out)) for _, _, out, _ in procs]
        return up, real
    finally:
        signal.signal(signal.SIGTERM, previous)
        for _, p, out, err in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            out.close()
            err.close()
        down = subprocess.run([gpemu, "netns", "down", "--prefix", prefix], capture_output=True, text=True)
        if down.returncode != 0:
            print(f"gpemu netns down --prefix {prefix} failed: {down.stderr.strip()}", file=sys.stderr)


def run_modelled(gpemu, job, bandwidth, bits, runs):
    """The same job as 2 modelled nodes whose NIC is the namespaces' shaped link."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"name": f"netns {bandwidth}", "line_rate_gbps": bits / 1e9, "achievable_fraction": 1448 / 1514,
                   "latency_us": 0, "nics_per_node": 1, "switch_oversubscription": 1,
                   "source": "gpemu netns: HTB at the rate on each veth end; TCP payload of each 1514-byte frame"}, f)
        network = f.name
    try:
        return json.loads(runs([gpemu, *job, "--clock", "virtual", "--nodes", "2", "--gpus-per-node", "1",
                                "--network", network, "--bucket-cap-mb", "1048576"], "modelled"))
    finally:
        os.unlink(network)


def measure(gpemu, bandwidth="1Gbit", steps=8, epochs=2, model="resnet18", batch=32, prefix=PREFIX,
            timeout_s=600):
    """Runs both halves; returns a dict: the job's settings, each run's JSON, the modelled step and epoch (s), each
    real rank's step, epoch and ratios to the modelled ones, and the commands run. Raises CannotRun with the reason
    where this machine cannot run the real half, RuntimeError where a run failed."""
    if epochs < 2:
        raise ValueError(f"epochs {epochs}: the first epoch is not compared, so at least 2 are needed")
    why = netns_refused(prefix)
    if why:
        raise CannotRun(why)
    gpemu = os.path.abspath(gpemu)
    job = ["train", "--synthetic", "--model", model, "--gpu", "v100", "-b", str(batch), "-n", str(steps),
           "--epochs", str(epochs), "--json"]
    runs = Runs()
    up, real = run_real(gpemu, job, bandwidth, prefix, runs, timeout_s)
    bits = up["bandwidth_bit_s"]
    modelled = run_modelled(gpemu, job, bandwidth, bits, runs)

    def step_s(j):  # the mean step of the epochs after the first
        return sum(j["epoch_times_s"][1:]) / (len(j["epoch_times_s"]) - 1) / steps

    m_step, m_epoch = step_s(modelled), modelled["epoch_times_s"][-1]
    ranks = [{"address": j["real_nodes"]["address"], "step_s": step_s(j), "epoch_s": j["epoch_times_s"][-1],
              "exchange_s": j["real_nodes"]["exchange_s"], "exchanges": j["real_nodes"]["exchanges"],
              "step_ratio": step_s(j) / m_step, "epoch_ratio": j["epoch_times_s"][-1] / m_epoch} for j in real]
    return {"model": model, "batch": batch, "steps": steps, "epochs": epochs, "bandwidth": bandwidth,
            "bandwidth_bit_s": bits, "modelled_json": modelled, "real_json": real, "modelled_step_s": m_step,
            "modelled_epoch_s": m_epoch, "ranks": ranks, "runs": runs.log}


def report_lines(m):
    """The lines both this script and repro/realnodes print."""
    lines = [f"job: {m['model']}, batch {m['batch']}, 1 emulated V100 per node, 2 nodes, {m['steps']} steps an epoch, "
             f"{m['bandwidth']} per node; epochs after the first compared",
             f"modelled (--clock virtual --nodes 2, NIC {m['bandwidth_bit_s'] / 1e9:g} Gb/s x 1448/1514): step "
             f"{m['modelled_step_s'] * 1e3:.1f} ms, epoch {m['modelled_epoch_s']:.3f} s"]
    for rank, r in enumerate(m["ranks"]):
        lines.append(f"real rank {rank} ({r['address']}): step {r['step_s'] * 1e3:.1f} ms, epoch {r['epoch_s']:.3f} s, "
                     f"network all-reduce {r['exchange_s']:.2f} s in {r['exchanges']}; real / modelled: step "
                     f"{r['step_ratio']:.3f}, epoch {r['epoch_ratio']:.3f}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpemu", default=os.path.join(os.path.dirname(__file__), "..", "build", "gpemu"))
    ap.add_argument("--bandwidth", default="1Gbit")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    try:
        m = measure(a.gpemu, a.bandwidth, a.steps, a.epochs, a.model, a.batch)
    except CannotRun as e:
        sys.exit(f"realnodes_agreement: cannot run on this machine: {e}")
    except (RuntimeError, ValueError) as e:
        sys.exit(f"realnodes_agreement: {e}")
    print("\n".join(report_lines(m)))


if __name__ == "__main__":
    main()
