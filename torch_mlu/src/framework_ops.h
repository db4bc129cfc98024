// framework_ops.h — the PyTorch ops, autograd nodes and program lines declared to opscope's hook
// (framework_ops.cpp).
#pragma once

namespace torch_mlu {

// The program's source line of the op being entered on the calling thread ("main.py:57 in train_step"), a
// string that stays valid to the end of the process; null when not known.
using ProgramLine = const char* (*)();

// Installs the source of program lines (python_lines.cpp, in the library the Python package loads; without
// it no op has a line). Exported: that library is another shared object.
__attribute__((visibility("default"))) void setProgramLine(ProgramLine line);

// The program's work is done: no more program lines are looked up (the interpreter may be finalizing).
void stopAttribution();

}  // namespace torch_mlu
