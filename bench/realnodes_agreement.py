#!/usr/bin/env python3
"""Real nodes against modelled nodes (issue 32): the same 2-node data-parallel job run twice.

Real: `gpemu netns up --nodes 2 --bandwidth RATE` (root), then one `gpemu train --clock real` per namespace with
torchrun's variables (RANK, WORLD_SIZE=2, MASTER_ADDR=node 0's address), so each step's network all-reduce is a real
gloo ring over the shaped veth links. Modelled: `gpemu train --clock virtual --nodes 2 --gpus-per-node 1 --network
FILE` with a NIC of the same rate, the payload fraction TCP leaves of each frame HTB counts (1448 / 1514: a 1500-byte
MTU with TCP timestamps, the Ethernet header; HTB does not count the preamble and gap) and the veth's latency.
Printed: each run's mean step time and epoch time, and their ratios (issue 32: within 10 %).

  sudo bench/realnodes_agreement.py [--gpemu build/gpemu] [--bandwidth 1Gbit] [--steps 8] [--model resnet18]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

PREFIX = "gpemuagr"


def run(cmd, env=None):
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpemu", default=os.path.join(os.path.dirname(__file__), "..", "build", "gpemu"))
    ap.add_argument("--bandwidth", default="1Gbit")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    gpemu = os.path.abspath(a.gpemu)
    job = ["train", "--synthetic", "--model", a.model, "--gpu", "v100", "-b", str(a.batch), "-n", str(a.steps),
           "--epochs", str(a.epochs), "--json"]

    up = json.loads(run([gpemu, "netns", "up", "--nodes", "2", "--bandwidth", a.bandwidth, "--prefix", PREFIX,
                         "--json"]).stdout)
    try:
        master = up["nodes"][0]["address"]
        with socket.socket() as s:  # a port for the rendezvous (rank 0 listens inside its namespace)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = []
        for rank, node in enumerate(up["nodes"]):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR=master,
                       MASTER_PORT=str(port))
            procs.append(subprocess.Popen(["ip", "netns", "exec", node["netns"], gpemu, *job, "--clock", "real"],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        real = []
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                sys.exit(f"a real rank failed: {err.strip()}")
            real.append(json.loads(out))
    finally:
        run([gpemu, "netns", "down", "--prefix", PREFIX])

    bits = up["bandwidth_bit_s"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"name": f"netns {a.bandwidth}", "line_rate_gbps": bits / 1e9, "achievable_fraction": 1448 / 1514,
                   "latency_us": 0, "nics_per_node": 1, "switch_oversubscription": 1,
                   "source": "gpemu netns: HTB at the rate on each veth end; TCP payload of each 1514-byte frame"}, f)
        network = f.name
    modelled = json.loads(run([gpemu, *job, "--clock", "virtual", "--nodes", "2", "--gpus-per-node", "1",
                               "--network", network, "--bucket-cap-mb", "1048576"]).stdout)
    os.unlink(network)

    def step_s(j):
        return sum(j["epoch_times_s"][1:]) / (len(j["epoch_times_s"]) - 1) / a.steps

    m_step, m_epoch = step_s(modelled), modelled["epoch_times_s"][-1]
    print(f"job: {a.model}, batch {a.batch}, 1 emulated V100 per node, 2 nodes, {a.steps} steps an epoch, "
          f"{a.bandwidth} per node; epochs after the first compared")
    print(f"modelled (--clock virtual --nodes 2, NIC {bits / 1e9:g} Gb/s x 1448/1514): step {m_step * 1e3:.1f} ms, "
          f"epoch {m_epoch:.3f} s")
    for rank, j in enumerate(real):
        r_step = step_s(j)
        print(f"real rank {rank} ({j['real_nodes']['address']}): step {r_step * 1e3:.1f} ms, epoch "
              f"{j['epoch_times_s'][-1]:.3f} s, network all-reduce {j['real_nodes']['exchange_s']:.2f} s in "
              f"{j['real_nodes']['exchanges']}; real / modelled: step {r_step / m_step:.3f}, epoch "
              f"{j['epoch_times_s'][-1] / m_epoch:.3f}")


if __name__ == "__main__":
    main()
