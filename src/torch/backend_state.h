// What the torch backend's CUDA slots (backend.cpp) share with the
// torch.ops.gpemu calls (gpemu_ops.cpp): the thread's current device, stream
// and phase, the allocator's blocks freed while other streams use them, and
// the values of small tensors the host filled. Functions defined in
// backend.cpp, so the per-op path's thread-locals stay in that one file.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "torch/runtime.h"

namespace gpemu::torch_backend {

inline c10::Device cuda_device(int i) { return {c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(i)}; }

// Refuses (TORCH_CHECK) a device index the run does not emulate.
void check_device(int index);

// The calling thread's current device, and its current stream on a device.
int current_device();
void set_current_device(int device);
std::int64_t current_stream(int device);
void set_current_stream(int device, std::int64_t stream);

// The calling thread's phase (forward, backward or optimizer).
OpProgram::Section current_section();

// Inside a call that issues many ops from C++ (Runtime::issue's cpp_loop);
// a cpp_call's first op pays the Python rate.
void note_cpp_loop(bool enter);
void note_cpp_call(bool enter);

// Bytes of `device` freed by the script but held for other streams.
std::uint64_t deferred_bytes(int device);
// Returns the deferred blocks of `device` whose streams are done to the
// allocator (every one of them, waiting for their streams, when `wait`).
void process_deferred_frees(int device, bool wait);

// A host copy of t's values; an undefined tensor when they are not known.
at::Tensor read_values(const at::Tensor& t);
// t (a CUDA tensor) now holds `values` (a host tensor t's size, or one
// broadcastable to it).
void write_values(const at::Tensor& t, const at::Tensor& values);

// What TORCH_LIBRARY(gpemu) installs when torch loads the backend: the
// phase's RecordFunction callback and the CUDA allocator.
void install_cuda_slots();

}  // namespace gpemu::torch_backend
