#include "error_log.h"

namespace opscope::memcheck {

bool ErrorLog::add(const MemoryError& e, const std::string& where) {
  std::string site = e.stack != 0 && e.kind != "race" ? "stack " + std::to_string(e.stack) : where;
  std::lock_guard lock(mutex_);
  const auto [it, added] = sites_.emplace(std::pair(e.kind, std::move(site)), errors_.size());
  if (!added) {
    ++errors_[it->second].count;
    return false;
  }
  errors_.push_back(e);
  return true;
}

std::vector<MemoryError> ErrorLog::all() const {
  std::lock_guard lock(mutex_);
  return errors_;
}

}  // namespace opscope::memcheck
