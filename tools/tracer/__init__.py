"""gpemu model-zoo tracer.

Records one training iteration of a PyTorch model on shape-only (meta) tensors:
every aten operator with its class, phase, FLOPs and bytes, and every tensor
storage with its size and lifetime. See docs/model-zoo.md.
"""

TRACER_VERSION = "1.0.0"
