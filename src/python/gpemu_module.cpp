// The Python module `gpemu` (pybind11): emulated GPUs for a researcher's own
// Python code (a loader, a cache, a scheduler prototype) without PyTorch:
// the catalog, devices with streams, events and the caching allocator on one
// emulated timeline, gpemu predict, the training job and several jobs on one
// GPU. A front end like the CLI: every figure comes from the library; its
// files only convert arguments and results. docs/python.md.
//
// This file is the module's init: its errors and the catalog's and the zoo's calls here;
// each concept's bindings in a file of its own (module.h).
#include <exception>
#include <string>
#include <string_view>

#include <Python.h>
#include <pybind11/pybind11.h>

#include "catalog/gpu_json.h"
#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/spec_error.h"
#include "gpemu/zoo.h"
#include "python/module.h"

namespace py = pybind11;

namespace {

// Python's keyword for a job spec's field (train's, Session.add_job's), or ""
// when none sets it: a SpecError from the engine is raised in those words.
std::string keyword_of_spec_field(std::string_view field) {
  static constexpr gpemu::SpecFieldWord kKeywords[] = {
      {"batch_size", "batch_size"},
      {"cluster.gpu", "gpu"},
      {"cluster.gpus", "gpus"},
      {"cluster.network", "network"},
      {"cluster.nodes", "nodes"},
      {"compute.model.name", "model"},
      {"compute.model.seq_len", "seq_len"},
      {"data.synthetic_batches", "iterations"},
      {"record.steps", "report"},
      {"schedule.max_iterations", "iterations"},
      {"trace", "trace"},
  };
  return gpemu::word_of_spec_field(kKeywords, field);
}

}  // namespace

PYBIND11_MODULE(gpemu, m) {
  using namespace gpemu;
  m.doc() =
      "Emulated GPUs for Python programs: devices, streams, events and the caching allocator on an emulated "
      "timeline; predict; training jobs; several jobs on one GPU. docs/python.md";
  m.attr("__version__") = "0.1.0";

  // Errors: gpemu.Error (RuntimeError); gpemu.InputError is also a ValueError;
  // gpemu.OutOfMemoryError, as torch.cuda.OutOfMemoryError, a RuntimeError.
  static PyObject* error = PyErr_NewException("gpemu.Error", PyExc_RuntimeError, nullptr);
  static PyObject* input_bases = PyTuple_Pack(2, error, PyExc_ValueError);
  static PyObject* input_error = PyErr_NewException("gpemu.InputError", input_bases, nullptr);
  static PyObject* oom_error = PyErr_NewException("gpemu.OutOfMemoryError", error, nullptr);
  static PyObject* resource_error = PyErr_NewException("gpemu.ResourceError", error, nullptr);
  m.attr("Error") = py::handle(error);
  m.attr("InputError") = py::handle(input_error);
  m.attr("OutOfMemoryError") = py::handle(oom_error);
  m.attr("ResourceError") = py::handle(resource_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(oom_error, e.what());
    } catch (const SpecError& e) {
      PyErr_SetString(input_error, e.worded(keyword_of_spec_field).c_str());
    } catch (const InputError& e) {
      PyErr_SetString(input_error, e.what());
    } catch (const ResourceError& e) {
      PyErr_SetString(resource_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error, e.what());
    }
  });

  // ---- the catalog and the zoo
  m.def(
      "gpus",
      [] {
        py::list l;
        for (const GpuSpec& g : gpu_catalog()) l.append(python::to_python(gpu_json(g)));
        return l;
      },
      "Every catalogued GPU as a dict (oldest first), as `gpemu devices --json`.");
  m.def(
      "gpu", [](const std::string& name) { return python::to_python(gpu_json(find_gpu(name))); }, py::arg("name"),
      "One GPU's specification; names are matched forgivingly ('v100', 'Tesla_V100-PCIE-32GB').");
  m.def("models", &zoo::zoo_models, "The model zoo's models.");
  m.def(
      "data_dir", [] { return zoo::data_dir(); },
      "Where the model zoo and the calibration are read from ($GPEMU_DATA_DIR, else the installed share/gpemu, "
      "else the source tree).");

  python::bind_devices(m);
  python::bind_jobs(m);
  python::bind_sharing_policies(m);
  // ---- sessions, and placement policies written in Python (docs/python.md)
  python::bind_placement_policies(m);
  python::bind_session(m);
  python::bind_cluster(m, error);
  python::bind_serve_client(m);
}
