// python_lines.cpp — the program's source line of each op, for opscope's attribution (framework_ops.h):
// the innermost Python frame outside the libraries (the standard library, site- and dist-packages with
// torch and torchvision, torch_mlu itself), as "main.py:57 in train_step". A library of its own
// (libtorch_mlu_python.so), loaded by the Python package only under opscope, so that libtorch_mlu.so needs no
// Python (a C++ program links it).
#include <Python.h>
#include <frameobject.h>

#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework_ops.h"
#include "opscope.h"

namespace torch_mlu {
namespace {

// Under the GIL: the library folders, and what is known of each code object seen (kept alive, so that its
// address is never reused for another).
struct Sources {
  std::vector<std::string> library_prefixes;
  std::string cwd;  // the program's files under it are named relative to it
  struct Code {
    bool library = false;
    std::string file;
    std::string function;
  };
  std::unordered_map<PyCodeObject*, Code> codes;
  std::unordered_map<std::uint64_t, std::string> lines;  // (code index, place) -> "file:line in function"
  std::unordered_map<std::uint64_t, int> numbers;        // (code index, place) -> line
  std::unordered_map<PyCodeObject*, std::uint32_t> code_index;
};

Sources& sources() {
  static Sources s;  // its code objects are only pointers: nothing of Python's to release at exit
  return s;
}

constexpr std::size_t kMaxCodes = 1 << 16;
constexpr std::size_t kMaxLines = 1 << 18;

// Whether file is a library's (<frozen importlib._bootstrap> too; the program's `python -c` code is
// <string>), and how much of its path to leave out when it is shown: its shortest library folder
// ("torch/nn/modules/conv.py").
bool isLibrary(const std::string& file, std::size_t* prefix_length) {
  *prefix_length = 0;
  if (file.empty() || file.starts_with("<frozen")) return true;
  bool library = false;
  for (const std::string& prefix : sources().library_prefixes) {
    if (file.compare(0, prefix.size(), prefix) == 0) {
      *prefix_length = library ? std::min(*prefix_length, prefix.size()) : prefix.size();
      library = true;
    }
  }
  return library;
}

const Sources::Code* codeOf(PyCodeObject* code) {
  Sources& s = sources();
  if (auto it = s.codes.find(code); it != s.codes.end()) return &it->second;
  if (s.codes.size() >= kMaxCodes) return nullptr;
  Sources::Code c;
  if (const char* file = PyUnicode_AsUTF8(code->co_filename); file != nullptr) c.file = file;
  const bool under_cwd = !s.cwd.empty() && c.file.compare(0, s.cwd.size(), s.cwd) == 0;
  if (const char* name = PyUnicode_AsUTF8(code->co_qualname); name != nullptr) c.function = name;
  PyErr_Clear();
  std::size_t library_prefix = 0;
  c.library = isLibrary(c.file, &library_prefix);
  if (c.library) {
    c.file.erase(0, library_prefix);
  } else if (under_cwd) {
    c.file.erase(0, s.cwd.size());
  }
  Py_INCREF(code);
  s.code_index.emplace(code, static_cast<std::uint32_t>(s.code_index.size()));
  return &s.codes.emplace(code, std::move(c)).first->second;
}

// Calls visit(code, info, frame) for each Python frame of the calling thread, innermost first, until it
// returns false; the GIL is held meanwhile (PyTorch's bindings release it around an op). Nothing on a thread
// that runs no Python (autograd's).
template <typename Visit>
void walkFrames(Visit&& visit) {
  if (PyGILState_GetThisThreadState() == nullptr) return;
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const Sources::Code* info = codeOf(code);
    const bool more = info == nullptr || visit(code, *info, frame);
    Py_DECREF(code);
    if (!more) break;
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
}

// The key of a frame's place in its code: (its code's index, its instruction where Python has it (3.11), else
// its line).
std::uint64_t placeKey(PyCodeObject* code, PyFrameObject* frame) {
#if PY_VERSION_HEX >= 0x030B0000
  const int at = PyFrame_GetLasti(frame);
#else
  const int at = PyFrame_GetLineNumber(frame);
#endif
  return (std::uint64_t{sources().code_index[code]} << 32) | static_cast<std::uint32_t>(at);
}

// A frame's line, worked out (PyCode_Addr2Line, a walk of the code's line table) once per place, not once
// per op or allocation.
int lineOf(PyCodeObject* code, PyFrameObject* frame) {
  Sources& s = sources();
  const std::uint64_t key = placeKey(code, frame);
  if (const auto it = s.numbers.find(key); it != s.numbers.end()) return it->second;
  const int number = PyFrame_GetLineNumber(frame);
  if (s.numbers.size() < kMaxLines) s.numbers.emplace(key, number);
  return number;
}

// The program's line that called the op being entered ("main.py:57 in train_step"): its innermost frame
// outside the libraries; null when there is none (or a limit was reached).
const char* programLine() {
  const char* line = nullptr;
  walkFrames([&](PyCodeObject* code, const Sources::Code& info, PyFrameObject* frame) {
    if (info.library) return true;
    Sources& s = sources();
    const std::uint64_t key = placeKey(code, frame);
    auto it = s.lines.find(key);
    if (it == s.lines.end() && s.lines.size() < kMaxLines) {
      const int number = lineOf(code, frame);
      it = s.lines.emplace(key, info.file + ":" + std::to_string(number) + " in " + info.function).first;
    }
    if (it != s.lines.end()) line = it->second.c_str();
    return false;
  });
  return line;
}

// opscope.h's stack source: the calling thread's Python frames, innermost first (library frames too), for
// the backtraces of memcheck and the flight recorder.
int programStack(opscope_program_frame* frames, int max) {
  int n = 0;
  walkFrames([&](PyCodeObject* code, const Sources::Code& info, PyFrameObject* frame) {
    if (n < max) frames[n++] = {info.file.c_str(), info.function.c_str(), lineOf(code, frame)};
    return n < max;
  });
  return n;
}

// torch.ops.torch_mlu.attribute_sources(prefixes, cwd): the folders whose files are libraries, one per
// line, each ending in '/', and the program's working folder (ending in '/'); from then on each outermost op
// is given the program's line.
void attributeSourcesOp(const std::string& prefixes, const std::string& cwd) {
  sources().cwd = cwd;  // the caller holds the GIL
  std::vector<std::string>& list = sources().library_prefixes;
  list.clear();
  std::string_view rest = prefixes;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    if (std::string_view one = rest.substr(0, end); !one.empty()) list.emplace_back(one);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  setProgramLine(&programLine);
  opscope_framework_stack_source(&programStack);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_mlu, m) { m.def("attribute_sources", &attributeSourcesOp); }

}  // namespace torch_mlu
