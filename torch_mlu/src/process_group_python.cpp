// process_group_python.cpp — the Python module torch_mlu._mlucl: the mlucl ProcessGroup (process_group.h)
// as a subclass of torch.distributed's ProcessGroup, which torch_mlu registers as the backend "mlucl". Bound
// with pybind11 as PyTorch binds its own process groups (the same pybind11 ABI as Debian's libtorch_python,
// so that the class derives from PyTorch's).
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_mlucl, m) {
  m.doc() = "torch_mlu's torch.distributed backend over libmlucl";
  py::module_::import("torch.distributed");  // PyTorch's ProcessGroup and Store classes
  py::class_<torch_mlu::ProcessGroupMlu, c10d::ProcessGroup, c10::intrusive_ptr<torch_mlu::ProcessGroupMlu>>(
      m, "ProcessGroupMLU")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<torch_mlu::ProcessGroupMlu>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());
}
