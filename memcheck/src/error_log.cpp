#include "error_log.h"

namespace opscope::memcheck {

bool ErrorLog::add(const MemoryError& e, const std::string& where) {
  std::string site = e.stack != 0 ? "stack " + std::to_string(e.stack) : where;
  std::lock_guard lock(mutex_);
  if (!sites_.emplace(e.kind, std::move(site)).second) return false;
  errors_.push_back(e);
  return true;
}

std::vector<MemoryError> ErrorLog::all() const {
  std::lock_guard lock(mutex_);
  return errors_;
}

}  // namespace opscope::memcheck
