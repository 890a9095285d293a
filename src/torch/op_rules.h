// The cost of one live aten operator: its class and FLOPs, by the same rules
// the model-zoo tracer applies to traced operators (tools/tracer/opclass.py,
// docs/model-zoo.md "FLOP rules"), so a live op and a traced op cost the same
// through the analytical model (OpProgram::Op, op_kernel_seconds).
// tests/python/test_torch_backend.py checks the two tables agree.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string_view>

#include "gpemu/cost_model.h"
#include "gpemu/zoo.h"

namespace gpemu::torch_backend {

// The tracer's class of aten op `name` (no "aten::" prefix); `optimizer`:
// issued inside optimizer.step() or zero_grad().
zoo::OpClass classify(std::string_view name, bool optimizer);

// FLOPs of one call (multiply-add = 2), from its arguments and outputs
// (tensors may be meta: only shapes are read).
double op_flops(std::string_view name, zoo::OpClass cls, c10::ArrayRef<c10::IValue> args,
                c10::ArrayRef<c10::IValue> outs);

// Bytes the op reads (its tensor arguments, except a first argument that
// WRITE_ONLY_SELF ops overwrite without reading, and the out= arguments of
// an out= overload, which `schema` names) and writes (its outputs).
double op_bytes(std::string_view name, c10::ArrayRef<c10::IValue> args, c10::ArrayRef<c10::IValue> outs,
                const c10::FunctionSchema* schema = nullptr);

// The analytical model's op: kind from the class, math from the dtype of the
// first tensor argument (f16 / bf16 run on tensor cores), FLOPs and bytes.
OpProgram::Op live_op(std::string_view name, OpProgram::Section section, c10::ArrayRef<c10::IValue> args,
                      c10::ArrayRef<c10::IValue> outs, const c10::FunctionSchema* schema = nullptr);

}  // namespace gpemu::torch_backend
