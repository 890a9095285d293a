// Shape rules of the torch backend (backend.cpp's boxed kernel): the output
// shapes of ops that torch 1.13 has no meta kernel for, of composites that
// would otherwise choose a CUDA library path (cuDNN's convolution, the
// normalisations' decompositions), and of the PyTorch 2 kernels gpemu_torch
// defines as gpemu::<name>. Outputs are meta tensors: shapes only.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpemu::torch_backend {

using Outs = std::vector<c10::IValue>;
using Rule = std::function<Outs(c10::ArrayRef<c10::IValue>)>;

// The rules by op name (no "aten::" prefix).
const std::unordered_map<std::string_view, Rule>& shape_rules();

// The rule of op `name` returning `n_rets` values: its own, or for a
// _foreach_ op one of the three _foreach_ rules.
std::string_view rule_name(std::string_view name, std::size_t n_rets);

}  // namespace gpemu::torch_backend
