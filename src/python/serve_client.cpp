// gpemu.ServeClient: a Python process's connection to `gpemu serve`, its
// own context, allocator and stream on one of the server's GPUs
// (docs/sharing.md).
#include <filesystem>
#include <memory>
#include <string>

#include "python/module.h"
#include "share/serve.h"

namespace gpemu::python {
namespace {

// One request to `gpemu serve` without arguments, the GIL released.
nlohmann::json serve_request(ServeClient& c, const char* op) {
  py::gil_scoped_release release;
  return c.request({{"op", op}});
}

}  // namespace

void bind_serve_client(py::module_& m) {
  py::class_<ServeClient>(m, "ServeClient",
                          "A connection to `gpemu serve`: this process's own CUDA context, caching allocator "
                          "and stream on one of the server's emulated GPUs, shared with the server's other "
                          "clients under its policy. Times are the server's emulated seconds.")
      .def(py::init(
               [](const std::string& socket, const std::string& name, int gpu, int priority, const std::string& mig) {
                 ClientHello hello;
                 hello.name = name;
                 hello.gpu = gpu;
                 hello.priority = priority;
                 hello.mig = mig;
                 py::gil_scoped_release release;
                 return std::make_unique<ServeClient>(
                     socket.empty() ? default_socket_path() : std::filesystem::path(socket), hello);
               }),
           py::arg("socket") = "", py::kw_only(), py::arg("name") = "python", py::arg("gpu") = 0,
           py::arg("priority") = 0, py::arg("mig") = "",
           "Connects to the server at `socket` (default: gpemu serve's) and attaches to its GPU `gpu`.")
      .def_property_readonly("gpu", [](const ServeClient& c) { return python::to_python(c.hello_reply()["gpu"]); })
      .def_property_readonly("client",
                             [](const ServeClient& c) { return python::to_python(c.hello_reply()["client"]); })
      .def("malloc", &ServeClient::malloc, py::arg("bytes"), py::call_guard<py::gil_scoped_release>(),
           "Allocates device memory from this client's caching allocator; returns the address. "
           "OutOfMemoryError (PyTorch's message) when the shared GPU has no room.")
      .def("free", &ServeClient::free, py::arg("ptr"), py::call_guard<py::gil_scoped_release>())
      .def(
          "kernel",
          [](ServeClient& c, double seconds, float sm, float bw) {
            c.kernel(python::seconds_arg(seconds, "kernel"), KernelDemand{sm, bw});
          },
          py::arg("seconds"), py::kw_only(), py::arg("sm") = 1.0f, py::arg("bw") = 1.0f,
          py::call_guard<py::gil_scoped_release>(),
          "Launches a kernel of `seconds` (alone on the GPU; sm and bw: the shares of the SMs and memory "
          "bandwidth it keeps busy) and returns at once.")
      .def(
          "sync", [](ServeClient& c) { return to_seconds(c.sync()); }, py::call_guard<py::gil_scoped_release>(),
          "Blocks until this client's work is done; returns when it ended (s).")
      .def(
          "batch",
          [](ServeClient& c, double seconds, float sm, float bw) {
            return to_seconds(c.batch(python::seconds_arg(seconds, "batch"), KernelDemand{sm, bw}));
          },
          py::arg("seconds"), py::kw_only(), py::arg("sm") = 1.0f, py::arg("bw") = 1.0f,
          py::call_guard<py::gil_scoped_release>(), "A kernel and a sync: one step of a GPEmu-style job.")
      .def(
          "memory", [](ServeClient& c) { return python::to_python(python::serve_request(c, "memory")); },
          "This client's allocator figures (the server's reply to `memory`).")
      .def(
          "smi", [](ServeClient& c) { return python::to_python(python::serve_request(c, "smi")["gpus"]); },
          "What `gpemu smi --json` prints: every GPU of the server with its processes.")
      .def(
          "request",
          [](ServeClient& c, const py::object& message) {
            const nlohmann::json m = python::from_python(message, "request");
            nlohmann::json reply;
            {
              py::gil_scoped_release release;
              reply = c.call(m);
            }
            return python::to_python(reply);
          },
          py::arg("message"),
          "Any request of the protocol (docs/sharing.md, 'Wire protocol'), e.g. {'op': 'stream'} or "
          "{'op': 'record', 'event': 1, 'stream': 1}; returns the reply. A refusal raises gpemu.InputError, "
          "gpemu.OutOfMemoryError or gpemu.Error.");
}

}  // namespace gpemu::python
