"""What the host pays per op for calls that issue many ops from C++.

A real GPU host runs a module's Python once per call; the kernels a C++
function of torch issues in a loop (an RNN's `_VF.lstm`: every gate's
matmuls and pointwise ops of every time step and layer) pay only the C++
dispatch and launch. Under the virtual clock the host pays the host
profile's per-op cost (Runtime::issue): these calls' first op pays the
Python (forward) rate and the rest the C++ (autograd engine's) rate.
"""
import functools

# torch._VF's functions that run a whole recurrent layer stack in C++.
_VF_LOOPS = ("lstm", "gru", "rnn_tanh", "rnn_relu")


def scoped(mark, fn):
    """fn, with mark(True) before each call and mark(False) after it."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        mark(True)
        try:
            return fn(*args, **kwargs)
        finally:
            mark(False)

    return wrapper


def patch(torch):
    ops = torch.ops.gpemu
    vf = torch._VF
    for name in _VF_LOOPS:
        fn = getattr(vf, name, None)
        if fn is not None:
            # nn.RNNBase.forward looks the function up on torch._VF at each call.
            setattr(vf, name, scoped(ops.cpp_call, fn))
