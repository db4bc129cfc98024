#include <opscope/symbolizer.h>

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace opscope {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::string baseName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The name of a subprogram or inlined subroutine DIE (through its abstract origin or specification):
// the demangled linkage name when there is one, else the plain name.
std::string dieName(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr) != nullptr) {
      if (const char* s = dwarf_formstring(&attr)) return demangle(s);
    }
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
    if (const char* s = dwarf_formstring(&attr)) return s;
  }
  return {};
}

}  // namespace

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  int status = 0;
  std::unique_ptr<char, FreeDeleter> out(abi::__cxa_demangle(name, nullptr, nullptr, &status));
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

struct Symbolizer::Impl {
  char* debuginfo_path = nullptr;
  Dwfl_Callbacks callbacks{};
  Dwfl* dwfl = nullptr;

  // The address ranges of a module's compile units, read from the units themselves: for modules without
  // .debug_aranges (clang emits none unless -gdwarf-aranges), where libdwfl's lookup finds no unit.
  struct UnitRange {
    Dwarf_Addr low, high;
    Dwarf_Die* unit;
  };
  struct Units {
    Dwarf_Addr bias = 0;
    std::vector<UnitRange> ranges;  // sorted by low
  };
  std::unordered_map<Dwfl_Module*, Units> units;

  // The compile unit that holds pc (a module's address), with its bias; nullptr when none does. by_ranges:
  // found by the units' ranges, not libdwfl's index.
  Dwarf_Die* compileUnitAt(Dwfl_Module* module, Dwarf_Addr pc, Dwarf_Addr* bias, bool* by_ranges) {
    if (Dwarf_Die* cu = dwfl_module_addrdie(module, pc, bias)) return cu;
    auto [it, fresh] = units.try_emplace(module);
    Units& u = it->second;
    if (fresh) {
      Dwarf_Die* cu = nullptr;
      while ((cu = dwfl_module_nextcu(module, cu, &u.bias)) != nullptr) {
        Dwarf_Addr base = 0, low = 0, high = 0;
        for (std::ptrdiff_t off = 0; (off = dwarf_ranges(cu, off, &base, &low, &high)) > 0;)
          if (high > low) u.ranges.push_back({low, high, cu});
      }
      std::sort(u.ranges.begin(), u.ranges.end(),
                [](const UnitRange& a, const UnitRange& b) { return a.low < b.low; });
    }
    const Dwarf_Addr at = pc - u.bias;
    auto next = std::upper_bound(u.ranges.begin(), u.ranges.end(), at,
                                 [](Dwarf_Addr a, const UnitRange& r) { return a < r.low; });
    // Ranges of different units do not overlap: the last one starting at or before pc is the only candidate.
    if (next == u.ranges.begin() || at >= std::prev(next)->high) return nullptr;
    *bias = u.bias;
    *by_ranges = true;
    return std::prev(next)->unit;
  }
};

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {
  impl_->callbacks.find_elf = dwfl_linux_proc_find_elf;
  impl_->callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
  impl_->callbacks.debuginfo_path = &impl_->debuginfo_path;
  impl_->dwfl = dwfl_begin(&impl_->callbacks);
  if (impl_->dwfl == nullptr) return;
  dwfl_report_begin(impl_->dwfl);
  const int rc = dwfl_linux_proc_report(impl_->dwfl, getpid());
  dwfl_report_end(impl_->dwfl, nullptr, nullptr);
  if (rc != 0) {
    dwfl_end(impl_->dwfl);
    impl_->dwfl = nullptr;
  }
}

Symbolizer::~Symbolizer() {
  if (impl_->dwfl != nullptr) dwfl_end(impl_->dwfl);
}

std::vector<Frame> Symbolizer::symbolize(std::uintptr_t address, bool return_address) {
  Frame base;
  base.address = address;
  const Dwarf_Addr pc = return_address && address > 0 ? address - 1 : address;
  Dwfl_Module* module = impl_->dwfl != nullptr ? dwfl_addrmodule(impl_->dwfl, pc) : nullptr;
  if (module == nullptr) return {base};
  Dwarf_Addr start = 0;
  if (const char* name =
          dwfl_module_info(module, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr))
    base.module = name;
  base.offset = address - start;
  base.function = demangle(dwfl_module_addrname(module, pc));

  // The source line of the innermost code at pc, when pc is inside a function the debug information
  // describes (elsewhere, the line table's nearest entry would belong to some other function).
  std::vector<Frame> frames;
  Dwarf_Addr bias = 0;
  bool by_ranges = false;
  Dwarf_Die* cu = impl_->compileUnitAt(module, pc, &bias, &by_ranges);
  Dwarf_Die* scopes = nullptr;
  const int n = cu != nullptr ? dwarf_getscopes(cu, pc - bias, &scopes) : 0;
  std::unique_ptr<Dwarf_Die, FreeDeleter> owned(scopes);
  std::string file;
  int line = 0;
  // (A unit found by its own ranges holds pc even when libdw finds no scope in it: elfutils 0.188 finds
  // none in clang's full -g DWARF 5, so such frames have their line but not their inlined frames.)
  if (n > 0 || (cu != nullptr && by_ranges)) {
    if (Dwarf_Line* l = dwarf_getsrc_die(cu, pc - bias)) {
      if (const char* f = dwarf_linesrc(l, nullptr, nullptr)) file = f;
      dwarf_lineno(l, &line);
    }
  }
  std::string outer_name;
  for (int i = 0; i < n; ++i) {
    Dwarf_Die* scope = &scopes[i];
    const int tag = dwarf_tag(scope);
    if (tag == DW_TAG_subprogram) {
      outer_name = dieName(scope);
      break;
    }
    if (tag != DW_TAG_inlined_subroutine) continue;
    Frame inl = base;
    inl.function = dieName(scope);
    inl.file = file;
    inl.line = line;
    inl.inlined = true;
    frames.push_back(std::move(inl));
    // The next frame out is at this inlined call's site.
    Dwarf_Attribute attr;
    Dwarf_Word value = 0;
    if (dwarf_formudata(dwarf_attr(scope, DW_AT_call_file, &attr), &value) == 0) {
      Dwarf_Files* files = nullptr;
      std::size_t count = 0;
      if (dwarf_getsrcfiles(cu, &files, &count) == 0 && value < count) {
        if (const char* f = dwarf_filesrc(files, value, nullptr, nullptr)) file = f;
      }
    }
    if (dwarf_formudata(dwarf_attr(scope, DW_AT_call_line, &attr), &value) == 0)
      line = static_cast<int>(value);
  }
  if (base.function.empty()) base.function = outer_name;
  base.file = file;
  base.line = line;
  frames.push_back(std::move(base));
  return frames;
}

void formatFrames(std::string& out, const std::vector<Frame>& frames, const char* indent) {
  int i = 0;
  for (const Frame& f : frames) {
    if (f.program) {  // no address: "#0 in forward models/resnet.py:92", or a site's line as it is
      fmt::format_to(std::back_inserter(out), "{}#{} in {}", indent, i++, f.function);
      if (!f.file.empty()) fmt::format_to(std::back_inserter(out), " {}:{}", f.file, f.line);
      out += '\n';
      continue;
    }
    fmt::format_to(std::back_inserter(out), "{}#{} {:#x} in {}", indent, i++, f.address,
                   f.function.empty() ? std::string("??") : f.function);
    if (!f.file.empty() && f.line > 0) {
      fmt::format_to(std::back_inserter(out), " {}:{}", f.file, f.line);
    } else if (!f.module.empty()) {
      fmt::format_to(std::back_inserter(out), " ({}+{:#x})", baseName(f.module), f.offset);
    }
    out += '\n';
  }
}

}  // namespace opscope
