"""gpemu's torch backend: emulated CUDA GPUs for an unmodified PyTorch script.

`gpemu torch -- script.py` runs the script with this package first on its
PYTHONPATH; its sitecustomize (boot/) calls install() in every Python process
of the run. install() loads the C++ backend (_backend.so) into torch, which
fills the CUDA device guard, allocator and kernels of a CPU-only torch build,
and points torch.cuda's Python functions at it. See docs/torch.md.
"""
import os

_installed = False


def supported_torch():
    """None when this torch build can be emulated, else why not."""
    import torch

    if not torch.__version__.startswith("1.13."):
        return (f"torch {torch.__version__}: gpemu torch supports Debian 12's CPU-only torch 1.13 "
                "(python3-torch); run the script with /usr/bin/python3")
    # torch's compile-time flags (install() supplies torch._C._cuda_* functions, so
    # their presence says nothing).
    if torch.version.cuda is not None or torch.backends.cuda.is_built():
        return (f"torch {torch.__version__} was built with CUDA {torch.version.cuda}: gpemu torch needs a "
                "CPU-only build, whose CUDA slots are empty (Debian 12's python3-torch)")
    return None


def install():
    """Loads the backend into torch and patches torch.cuda. Idempotent."""
    global _installed
    if _installed:
        return
    import torch

    why = supported_torch()
    if why is not None:
        raise RuntimeError("gpemu torch: " + why)
    # The script's own process writes the run's summary, trace and report
    # when it ends (gpemu torch --json / --trace / --report), with the parts
    # its ranks (processes it started that used an emulated GPU) left in a
    # folder it makes for them (before the backend reads the environment)
    # and removes afterwards.
    import atexit

    outputs = any(os.environ.get(v) for v in ("GPEMU_TORCH_JSON", "GPEMU_TORCH_TRACE", "GPEMU_TORCH_REPORT"))
    main = os.environ.get("GPEMU_TORCH_MAIN_PID") == str(os.getpid())
    parts = None
    if main and outputs and not os.environ.get("GPEMU_TORCH_PARTS"):
        import shutil
        import tempfile

        parts = tempfile.mkdtemp(prefix="gpemu-torch-parts-")
        os.environ["GPEMU_TORCH_PARTS"] = parts
        atexit.register(shutil.rmtree, parts, True)  # runs after finish (atexit: last in, first out)
    torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_backend.so"))
    from . import _clock, _cuda, _dist, _host

    _cuda.patch(torch)
    _dist.patch(torch)
    _clock.patch(torch)
    _host.patch(torch)
    from . import _models

    _models.patch(torch)
    if os.environ.get("GPEMU_TORCH_API", "2") == "2":  # gpemu torch --torch 2 (the default)
        from . import _torch2

        _torch2.patch(torch)
    if main or (outputs and os.environ.get("GPEMU_TORCH_PARTS")):
        atexit.register(_finish, torch.ops.gpemu.finish, parts)
    _installed = True


def _finish(finish, parts):
    """Writes the run's outputs as the script ends. An exception in an atexit
    hook is printed but leaves the exit status 0, so an output that cannot be
    written (a full disk) would look like success: name each failure and exit 1."""
    try:
        finish()
    except Exception as e:  # noqa: BLE001 - whatever stopped the outputs fails the run
        import sys

        for line in str(e).splitlines() or ["the run's outputs could not be written"]:
            sys.stderr.write(f"gpemu torch: error: {line}\n")
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - nothing more can be said
                pass
        if parts:  # the hooks os._exit skips
            import shutil

            shutil.rmtree(parts, True)
        os._exit(1)
