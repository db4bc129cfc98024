// Shared helpers of the libmlurt test suite: status printing, assertion macros, RAII owners of queues,
// notifiers and device memory, gates that hold a queue's worker, and closures run as host functions.
#pragma once

#include <mlu/mlurt.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <utility>

// gtest prints statuses by name ("MLURT_ERROR_INVALID_VALUE: ...") instead of as bare numbers.
inline void PrintTo(mlurtStatus_t status, std::ostream* os) {
  *os << static_cast<int>(status) << " (" << mlurtGetErrorString(status) << ")";
}

// The calling thread's last error message, copied (the runtime's pointer is only valid until the next call).
inline std::string lastMessage() {
  const char* message = mlurtGetLastErrorMessage();
  return message == nullptr ? std::string("<NULL message>") : std::string(message);
}

// The call succeeds; on failure the runtime's message is shown.
#define EXPECT_OK(call) EXPECT_EQ((call), MLURT_SUCCESS) << #call << ": " << lastMessage()
#define ASSERT_OK(call) ASSERT_EQ((call), MLURT_SUCCESS) << #call << ": " << lastMessage()

namespace mlurt_test {

inline std::string toLower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Matches a string (std::string or const char*) that contains `needle`, ignoring case. (Written by hand:
// MATCHER_P needs libgmock, which the suite does not link.)
class HasSubstrNoCase {
 public:
  using is_gtest_matcher = void;
  explicit HasSubstrNoCase(std::string needle) : needle_(std::move(needle)) {}
  template <typename Text>
  bool MatchAndExplain(const Text& text, std::ostream* /*listener*/) const {
    return toLower(std::string(text)).find(toLower(needle_)) != std::string::npos;
  }
  void DescribeTo(std::ostream* os) const { *os << "contains \"" << needle_ << "\" (ignoring case)"; }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not contain \"" << needle_ << "\" (ignoring case)";
  }

 private:
  std::string needle_;
};

}  // namespace mlurt_test

// The call fails with `status`, records it as the thread's last error, and its message mentions `keyword`
// (ignoring case).
#define EXPECT_FAILS_WITH(call, status, keyword)                                                          \
  do {                                                                                                    \
    const mlurtStatus_t mlurt_test_status_ = (call);                                                      \
    EXPECT_EQ(mlurt_test_status_, (status)) << #call;                                                     \
    EXPECT_EQ(mlurtPeekAtLastError(), (status)) << #call << " did not record its error";                  \
    EXPECT_THAT(lastMessage(), ::mlurt_test::HasSubstrNoCase(keyword)) << #call << ": unhelpful message"; \
  } while (0)

namespace mlurt_test {

inline constexpr std::size_t kMiB = std::size_t{1} << 20;
inline constexpr std::size_t kAlignment = 256;
inline constexpr std::size_t kDefaultMemoryBytes = std::size_t{8192} * kMiB;
inline constexpr int kDefaultDeviceCount = 2;

inline std::size_t roundUp(std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// True when the process runs with the runtime's default configuration (no MLU_SIM_* variable set).
inline bool defaultEnvironment() {
  for (const char* name : {"MLU_SIM_DEVICE_COUNT", "MLU_SIM_MEMORY_MB", "MLU_SIM_CORES"}) {
    if (std::getenv(name) != nullptr) return false;
  }
  return true;
}

inline int deviceCount() {
  int count = 0;
  EXPECT_OK(mlurtGetDeviceCount(&count));
  return count;
}

inline int currentDevice() {
  int device = -1;
  EXPECT_OK(mlurtGetDevice(&device));
  return device;
}

inline mlurtDeviceProp_t properties(int device) {
  mlurtDeviceProp_t prop{};
  EXPECT_OK(mlurtGetDeviceProperties(&prop, device));
  return prop;
}

inline mlurtDeviceCounters_t counters(int device) {
  mlurtDeviceCounters_t c{};
  EXPECT_OK(mlurtDeviceGetCounters(device, &c));
  return c;
}

inline mlurtPointerAttributes_t attributes(const void* ptr) {
  mlurtPointerAttributes_t a{};
  a.type = static_cast<mlurtMemoryType_t>(-1);
  a.device = -42;
  EXPECT_OK(mlurtPointerGetAttributes(&a, ptr));
  return a;
}

// Makes `device` current for the scope, then restores the previous current device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) : previous_(currentDevice()) { EXPECT_OK(mlurtSetDevice(device)); }
  ~DeviceScope() { EXPECT_OK(mlurtSetDevice(previous_)); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_;
};

// Free bytes of a device, as mlurtMemGetInfo reports them when the device is current.
inline std::size_t freeBytes(int device) {
  DeviceScope scope(device);
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  EXPECT_OK(mlurtMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

// A queue of the current device, destroyed (after draining) at the end of the scope.
class ScopedQueue {
 public:
  ScopedQueue() { EXPECT_OK(mlurtQueueCreate(&queue_)); }
  ~ScopedQueue() {
    if (queue_ != nullptr) {
      EXPECT_OK(mlurtQueueDestroy(queue_));
    }
  }
  ScopedQueue(const ScopedQueue&) = delete;
  ScopedQueue& operator=(const ScopedQueue&) = delete;

  mlurtQueue_t get() const { return queue_; }
  // Gives up ownership (the test destroys the queue itself).
  mlurtQueue_t release() { return std::exchange(queue_, nullptr); }
  uint64_t id() const {
    uint64_t id = 0;
    EXPECT_OK(mlurtQueueGetId(queue_, &id));
    return id;
  }

 private:
  mlurtQueue_t queue_ = nullptr;
};

class ScopedNotifier {
 public:
  explicit ScopedNotifier(unsigned flags = MLURT_NOTIFIER_DEFAULT) {
    EXPECT_OK(mlurtNotifierCreate(&notifier_, flags));
  }
  ~ScopedNotifier() {
    if (notifier_ != nullptr) {
      EXPECT_OK(mlurtNotifierDestroy(notifier_));
    }
  }
  ScopedNotifier(const ScopedNotifier&) = delete;
  ScopedNotifier& operator=(const ScopedNotifier&) = delete;

  mlurtNotifier_t get() const { return notifier_; }
  mlurtNotifier_t release() { return std::exchange(notifier_, nullptr); }

 private:
  mlurtNotifier_t notifier_ = nullptr;
};

// Device memory of the current device, freed at the end of the scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t size) : size_(size) { EXPECT_OK(mlurtMalloc(&ptr_, size)); }
  ~DeviceBuffer() { EXPECT_OK(mlurtFree(ptr_)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  unsigned char* bytes() const { return static_cast<unsigned char*>(ptr_); }
  std::size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  std::size_t size_;
};

// Pinned host memory, freed at the end of the scope.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t size) : size_(size) { EXPECT_OK(mlurtHostMalloc(&ptr_, size)); }
  ~PinnedBuffer() { EXPECT_OK(mlurtHostFree(ptr_)); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* get() const { return ptr_; }
  unsigned char* bytes() const { return static_cast<unsigned char*>(ptr_); }
  std::size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  std::size_t size_;
};

// Holds a queue's worker until opened. wait() gives up after 30 s so that a failing test cannot hang the
// suite; it returns whether the gate was opened.
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool isOpen() const {
    std::lock_guard lock(mutex_);
    return open_;
  }
  bool wait() const {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return open_; });
  }
  // A host function that waits for the gate given as its user data.
  static void hostFn(void* gate) { static_cast<Gate*>(gate)->wait(); }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool open_ = false;
};

// Opens a gate at the end of its scope (and then drains `queue`, if given, so that no worker still uses the
// gate afterwards). Declare the gate first, then the queue it holds, then this: the gate opens before the
// queue is destroyed (which waits for its work), and the gate outlives both.
class OpenAtExit {
 public:
  explicit OpenAtExit(Gate& gate, mlurtQueue_t queue_to_drain = nullptr, bool drain = false)
      : gate_(gate), queue_(queue_to_drain), drain_(drain) {}
  ~OpenAtExit() {
    gate_.open();
    if (drain_) mlurtQueueSync(queue_);
  }
  OpenAtExit(const OpenAtExit&) = delete;
  OpenAtExit& operator=(const OpenAtExit&) = delete;

 private:
  Gate& gate_;
  mlurtQueue_t queue_;
  bool drain_;
};

// Enqueues a closure as a host function; the closure is released after it ran.
inline mlurtStatus_t launchHost(mlurtQueue_t queue, std::function<void()> fn) {
  auto holder = std::make_unique<std::function<void()>>(std::move(fn));
  const mlurtStatus_t status = mlurtLaunchHostFunc(
      queue,
      [](void* data) {
        std::unique_ptr<std::function<void()>> closure(static_cast<std::function<void()>*>(data));
        (*closure)();
      },
      holder.get());
  if (status == MLURT_SUCCESS) holder.release();
  return status;
}

// Enqueues a host function that sleeps for `duration`.
inline mlurtStatus_t launchSleep(mlurtQueue_t queue, std::chrono::milliseconds duration) {
  return launchHost(queue, [duration] { std::this_thread::sleep_for(duration); });
}

// Enqueues a closure as a kernel; the runtime owns (and deletes) the closure from the call on.
inline mlurtStatus_t launchKernel(mlurtQueue_t queue, const char* name, std::function<mlurtStatus_t()> fn,
                                  uint64_t* task_id = nullptr) {
  auto holder = std::make_unique<std::function<mlurtStatus_t()>>(std::move(fn));
  return mlurtLaunchKernel(
      queue, name, [](void* args) { return (*static_cast<std::function<mlurtStatus_t()>*>(args))(); },
      holder.release(),
      [](void* args) {
        std::unique_ptr<std::function<mlurtStatus_t()>> owned(
            static_cast<std::function<mlurtStatus_t()>*>(args));
      },
      task_id);
}

// Every test starts and ends on device 0 with a clear last error.
class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(mlurtSetDevice(0));
    mlurtGetLastError();
  }
  void TearDown() override { EXPECT_OK(mlurtSetDevice(0)); }
};

}  // namespace mlurt_test
