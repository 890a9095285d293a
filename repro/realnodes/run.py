"""Real nodes against modelled nodes (issue 32): one 2-node data-parallel job run as two real processes in network
namespaces and as 2 modelled nodes under the virtual clock; a --full item (root). The job: resnet18, batch 32, one
emulated V100 per node, 8 steps an epoch, 2 epochs, the second compared. Real: `gpemu netns up --nodes 2 --bandwidth
1Gbit` and one `gpemu train --clock real` per namespace with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, set here as torchrun sets them, so torchrun itself is not needed), each step's network all-reduce a gloo
ring over the shaped veth links. Modelled: `--clock virtual --nodes 2 --gpus-per-node 1` with a NIC of the same rate
(bench/realnodes_agreement.py, whose measure() this item runs; docs/interconnect.md, "Real against modelled").
Compared: real / modelled step and epoch time of the slower rank against 1.0, 10 % (reference kind: the modelled run,
`modelled_run`; there is no published figure); each rank's step and epoch beside the modelled ones as info. No anchor.
Skipped under --quick, and where the machine cannot run it (not root, no ip and tc, namespaces refused, a gpemu
built without gloo), with the reason printed. `gpemu netns down` runs whether the runs pass or fail. --clock is not
used: the item always runs both clocks."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import realnodes_agreement as agreement  # noqa: E402
import repro  # noqa: E402

SOURCE = "bench/realnodes_agreement.py's job (docs/interconnect.md, Real against modelled)"


def main():
    item = repro.start("realnodes", "Real nodes in namespaces against modelled nodes, resnet18, 2 nodes", __doc__, HERE,
                       needs_reference=False)
    if not item.full:
        print("realnodes: skipped: a --full item (two real ranks in network namespaces, as root, about 10 s of wall "
              "time): repro/realnodes/run.sh --full")
        return 0
    try:
        m = agreement.measure(repro.gpemu_binary(), prefix="gpemurepro")
    except agreement.CannotRun as e:
        print(f"realnodes: skipped: this machine cannot run the real nodes: {e}")
        return 0
    except RuntimeError as e:
        sys.exit(f"realnodes: {e}")
    for name in ["model", "batch", "steps", "epochs", "bandwidth"]:
        item.input(name, m[name], SOURCE)
    item.input("latency", "0: the namespaces' links have no netem delay, and the modelled NIC none",
               "gpemu netns up without --latency")
    item.input("modelled NIC", f"{m['bandwidth_bit_s'] / 1e9:g} Gb/s x 1448/1514 (TCP payload of each frame HTB "
               "counts), --bucket-cap-mb 1048576", SOURCE)
    item.runs = m["runs"]
    for line in agreement.report_lines(m):
        print(f"realnodes: {line}")

    slower = max(m["ranks"], key=lambda r: r["step_s"])
    item.compare("step_ratio@nodes=2", "real / modelled mean step (x)", slower["step_ratio"], 1.0, "modelled_run",
                 note=f"the slower rank, {slower['address']}")
    item.compare("epoch_ratio@nodes=2", "real / modelled epoch time (x)", slower["epoch_ratio"], 1.0, "modelled_run",
                 note=f"the slower rank, {slower['address']}")
    for rank, r in enumerate(m["ranks"]):
        item.compare(f"step_ms@nodes=2;rank={rank}", "mean step (ms)", r["step_s"] * 1e3, m["modelled_step_s"] * 1e3,
                     "modelled_run", primary=False)
        item.compare(f"epoch_s@nodes=2;rank={rank}", "epoch time (s)", r["epoch_s"], m["modelled_epoch_s"],
                     "modelled_run", primary=False)

    def plot(ax):
        epochs = list(range(1, m["epochs"] + 1))
        ax.plot(epochs, m["modelled_json"]["epoch_times_s"], color="tab:blue", marker="o", linestyle="--",
                label="modelled (--clock virtual --nodes 2)")
        for rank, j in enumerate(m["real_json"]):
            ax.plot(epochs, j["epoch_times_s"], marker="s", label=f"real rank {rank} (netns)")

    return item.finish(plot, xlabel="epoch", ylabel="epoch time (s)")


if __name__ == "__main__":
    sys.exit(main())
