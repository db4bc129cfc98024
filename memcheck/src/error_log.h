// error_log.h — the memory errors memcheck found, each kind reported once per site: the offending call's
// backtrace when there are backtraces, else the place the caller names (the op and argument, the runtime
// function, the address). Thread-safe.
#pragma once

#include "allocation.h"

#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace opscope::memcheck {

class ErrorLog {
 public:
  // Keeps the error if it is the first of its kind at its site: true when kept (the caller then reports it).
  bool add(const MemoryError& e, const std::string& where);
  std::vector<MemoryError> all() const;  // in the order found

 private:
  mutable std::mutex mutex_;
  std::vector<MemoryError> errors_;
  std::set<std::pair<std::string, std::string>> sites_;  // (kind, site)
};

}  // namespace opscope::memcheck
