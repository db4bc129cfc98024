// error_log.h — the memory errors memcheck found, each kind reported once per site: the offending call's
// backtrace when there are backtraces, else the place the caller names (the op and argument, the runtime
// function, the address); a race's site is always the pair of accesses the caller names. The same site again
// is counted. Thread-safe.
#pragma once

#include "allocation.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace opscope::memcheck {

class ErrorLog {
 public:
  // Keeps the error if it is the first of its kind at its site: true when kept (the caller then reports it);
  // else counts it with the first.
  bool add(const MemoryError& e, const std::string& where);
  std::vector<MemoryError> all() const;  // in the order found

 private:
  mutable std::mutex mutex_;
  std::vector<MemoryError> errors_;
  std::map<std::pair<std::string, std::string>, std::size_t> sites_;  // (kind, site) -> index in errors_
};

}  // namespace opscope::memcheck
