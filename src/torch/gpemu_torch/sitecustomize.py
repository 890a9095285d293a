"""Loaded by every Python process of a `gpemu torch` run (the package's folder
is first on PYTHONPATH there): installs the emulated GPUs once torch can be
imported. Processes started outside gpemu torch never see this file."""
import os

if os.environ.get("GPEMU_TORCH_ACTIVE") == "1":
    import gpemu_torch

    gpemu_torch.install()
