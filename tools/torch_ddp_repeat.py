"""Runs the torch Nodes test's two-rank DDP script (tests/torch/test_torch_backend.py, TORCHRUN_RANK)
several times under `gpemu torch --clock virtual` and prints each rank's last step time, peak
reserved and peak allocated memory per run: under the virtual clock a run's figures should repeat
(docs/torch.md, "Distributed").

usage (from the repository root, after a build):
    /usr/bin/python3 tools/torch_ddp_repeat.py [RANKS_PER_NODE (1: two nodes, 2: one node)] [RUNS]
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
import test_torch_backend as t  # noqa: E402  (the test's script and free_port)

GPEMU = os.path.abspath("build/gpemu")


def main():
    per = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    if per not in (1, 2) or runs < 1:
        sys.exit("torch_ddp_repeat: give RANKS_PER_NODE 1 or 2 and RUNS >= 1")
    for run in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "rank.py")
            with open(script, "w") as f:
                f.write("import json, torch\n" + t.TORCHRUN_RANK)
            port, procs = t.free_port(), []
            for r in range(2):
                env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(r),
                           LOCAL_RANK=str(r % per), LOCAL_WORLD_SIZE=str(per), GROUP_RANK=str(r // per))
                procs.append(subprocess.Popen(
                    [GPEMU, "torch", "--clock", "virtual", "--gpu", "a100", "--gpus", str(per), "--json",
                     os.path.join(tmp, f"s{r}.json"), "--", script, os.path.join(tmp, "o")],
                    env=env, stderr=subprocess.PIPE, text=True))
            for p in procs:
                err = p.communicate()[1]
                if p.returncode != 0:
                    sys.exit(f"torch_ddp_repeat: a rank failed:\n{err}")
            row = []
            for r in range(2):
                with open(os.path.join(tmp, f"s{r}.json")) as f:
                    s = json.load(f)
                with open(os.path.join(tmp, f"o.{r}")) as f:
                    step = json.load(f)["step"]
                row.append(f"rank {r}: step {step * 1e3:.6f} ms, peak reserved {s['peak_reserved_mib']} MiB, "
                           f"peak allocated {s['peak_allocated_mib']:.4f} MiB")
            print(f"run {run}: " + "; ".join(row), flush=True)


if __name__ == "__main__":
    main()
