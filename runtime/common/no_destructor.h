// no_destructor.h — a process-lifetime object that is never destroyed, for state that must outlive every
// static destructor of the program (which may still call into the libraries at exit).
#pragma once

#include <memory>
#include <new>
#include <utility>

namespace mlu {

template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args&&... args) {
    std::construct_at(reinterpret_cast<T*>(storage_), std::forward<Args>(args)...);
  }
  NoDestructor(const NoDestructor&) = delete;
  NoDestructor& operator=(const NoDestructor&) = delete;

  T& get() { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace mlu
