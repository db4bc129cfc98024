// symbolizer.h — return addresses to function, source file and line with elfutils' libdwfl, for the reports
// only (never on the allocation path). One return address can stand for several frames: the functions
// inlined at the call site, innermost first, then the function the code belongs to. A frame in a module
// without debug information still gets the ELF symbol when there is one, and always the module's name and
// the offset in it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace opscope {

struct Frame {
  std::uintptr_t address = 0;  // as unwound (a return address, except for the innermost frame)
  std::string function;        // demangled, "" when unknown
  std::string file;            // source file as the debug information names it, "" when unknown
  int line = 0;
  std::string module;         // path of the shared object or executable
  std::uintptr_t offset = 0;  // address - the module's load address
  bool inlined = false;       // a function inlined into the next frame
  bool program = false;       // a frame of the program's own language (Python's), not machine code
};

class Symbolizer {
 public:
  // Reports the modules mapped into this process now (dlopen'ed ones included).
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // The frames at one address of a backtrace; return_address: look up address - 1 (the call instruction),
  // as for every unwound frame but the innermost.
  std::vector<Frame> symbolize(std::uintptr_t address, bool return_address = true);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "alloc_buffer(int)" from "_Z12alloc_bufferi"; a name that is not mangled comes back as it is.
std::string demangle(const char* name);

// Appends a backtrace in the LeakSanitizer style, one line per frame, numbered from #0:
//     #0 0x55d1c3a2b1c4 in alloc_buffer(int) /src/leaky.cpp:42
//     #1 0x7f1c2a0271ca in __libc_start_call_main (libc.so.6+0x271ca)
void formatFrames(std::string& out, const std::vector<Frame>& frames, const char* indent = "    ");

}  // namespace opscope
