"""tools/profiler/gpemu_profile.py's op classes: an outermost op takes the class of the aten ops below it, and a
functional wrapper whose calls the profiler's tree does not show takes its own name's class (a conv2d with no
convolution below it was once written as elementwise on a loaded machine)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "profiler"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "tracer"))
import gpemu_profile  # noqa: E402
import opclass  # noqa: E402


def op_class(names, phase="forward", shapes=()):
    return gpemu_profile.op_class(opclass, names, phase, list(shapes))


class OpClasses(unittest.TestCase):
    def test_the_aten_ops_below_decide(self):
        self.assertEqual(op_class(["conv2d", "convolution", "_convolution", "mkldnn_convolution"]), "conv")
        self.assertEqual(op_class(["linear", "t", "addmm"]), "matmul")
        self.assertEqual(op_class(["relu"]), "elementwise")

    def test_a_wrapper_without_its_calls_takes_its_own_class(self):
        self.assertEqual(op_class(["conv2d"], shapes=[[1, 3, 224, 224], [64, 3, 7, 7]]), "conv")
        self.assertEqual(op_class(["conv3d"], shapes=[[1, 3, 8, 32, 32], [8, 3, 3, 3, 3]]), "conv3d")
        self.assertEqual(op_class(["batch_norm"]), "norm")
        self.assertEqual(op_class(["linear"]), "matmul")

    def test_the_optimizer_keeps_its_class(self):
        self.assertEqual(op_class(["linear"], phase="optimizer"), "optimizer")
        self.assertEqual(op_class(["add_"], phase="optimizer"), "optimizer")


if __name__ == "__main__":
    unittest.main()
