// program_stack.h — the calling thread's stack in the program's own language (Python's frames under
// torch_mlu), as its framework gives it through opscope.h's opscope_framework_stack_source: backtraces
// (memcheck's, the flight recorder's) show it above the native frames.
#pragma once

namespace opscope {

// One frame, innermost first; the strings stay valid to the end of the process.
struct ProgramFrame {
  const char* file = nullptr;
  const char* function = nullptr;
  int line = 0;
};

// Fills up to max frames of the calling thread's program stack, innermost first, and returns how many (0:
// the thread runs no program code, or none is known).
using ProgramStackSource = int (*)(ProgramFrame* frames, int max);

// Installs the source (null: none). Global: the framework installs it once for the process, and every
// tool's backtraces read it.
void setProgramStackSource(ProgramStackSource source);
int programStack(ProgramFrame* frames, int max);

}  // namespace opscope
