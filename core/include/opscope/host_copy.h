// host_copy.h — an op's tensors copied out of device memory, and the CPU reference run on the copies: what
// fallback runs instead of the device, and what auto-compare checks the device against.
//
// Each tensor the op reads (IN, INOUT) is copied as its whole extent (from its first element to one past its
// last, strides kept), so the reference sees exactly the layout the device would; a tensor the op only
// writes (OUT) gets a zeroed host extent of its size and is not copied in. Host memory comes from a
// BufferPool, so a long run does not map, fault in and unmap fresh pages for every op. The caller syncs the
// op's queue first, or has the copies queued on it (CopyMode::queued).
// Inside libopscope.so the copies go through the hook's own mlurt* symbols with the recursion guard set
// (so only runtime calls the hook wraps may be used here: libopscope.so links no runtime library).
#pragma once

#include <opscope/tensor_snapshot.h>

#include <mlu/mlurt.h>
#include <mlu/op_args.h>
#include <mlu/reference.h>
#include <mlu/status.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace opscope {

// Host memory reused across op calls: blocks handed out by acquire() come back when their Lease ends and
// serve later calls of at most their size (best fit). It keeps at most kMaxFree blocks (about the tensors
// of the few ops in flight) and at most kMaxFreeBytes of them: past that it frees the largest, so a model
// with huge tensors pays fresh pages for them rather than holding their memory for the rest of the run.
// Thread-safe. Always owned by a std::shared_ptr
// (make_shared): a lease keeps its pool alive, so a lease may outlive the pool's other owners.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static constexpr std::size_t kMaxFree = 32;
  static constexpr std::size_t kMaxFreeBytes = std::size_t{1} << 30;  // 1 GiB

  // A block of at least size() bytes, uninitialized, owned until the lease ends.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }
    std::byte* data() const { return block_.get(); }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

   private:
    friend class BufferPool;
    void release();
    std::shared_ptr<BufferPool> pool_;
    std::unique_ptr<std::byte[]> block_;
    std::size_t size_ = 0, capacity_ = 0;
  };

  Lease acquire(std::size_t bytes);

 private:
  struct Block {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
  };
  void giveBack(std::unique_ptr<std::byte[]> data, std::size_t capacity);

  std::mutex mutex_;
  std::vector<Block> free_;     // guarded by mutex_
  std::size_t free_bytes_ = 0;  // their capacities, summed
};

// How copyIn copies from the device: blocking (the caller synced the op's queue first), or queued on a queue
// (mlurtMemcpyAsync) ahead of the op: the host buffers then hold the inputs only once the queue has run the
// copies, and must stay alive until then.
struct CopyMode {
  static CopyMode blocking() { return {}; }
  static CopyMode queued(mlurtQueue_t queue) { return {true, queue}; }
  bool async = false;
  mlurtQueue_t queue = nullptr;  // (NULL: the default queue)
};

// The part of a HostCopy that does not depend on the op (core/src/host_copy.cpp: compiled once, not
// once per op): the host buffers of an op's tensors and the copies between them and the device.
class HostBuffers {
 public:
  // Copies each present input's whole extent to a host buffer from pool (zeroes one for each output the op
  // only writes) and points its view there; gives the workspace (when there is one) a host buffer of its
  // size. Throws std::runtime_error when the runtime refuses a copy (a pointer that is not device memory);
  // queued copies are waited for first, so nothing still writes into the buffers then.
  void copyIn(const std::vector<mlu::MutableTensorArg>& tensors, mlu::Workspace* workspace, BufferPool& pool,
              CopyMode mode = CopyMode::blocking());

  // Copies every output (OUT, INOUT) back to the device pointer its view had before copyIn. A contiguous
  // output is written as a whole; a strided one element by element into a fresh copy of its device extent,
  // so memory between its elements (another output, or data the op does not own) keeps what the device
  // holds now.
  void writeBack(const std::vector<mlu::MutableTensorArg>& tensors) const;

 private:
  std::vector<void*> device_;               // each tensor's device pointer, in schema order
  std::vector<BufferPool::Lease> buffers_;  // each tensor's host extent, in schema order
  BufferPool::Lease workspace_;
};

template <typename Args>
class HostCopy {
 public:
  // Copies the tensors of device_args to host memory from pool (which must outlive this), as mode says.
  // Throws std::runtime_error when the runtime refuses a copy (a pointer that is not device memory).
  HostCopy(const Args& device_args, BufferPool& pool, CopyMode mode = CopyMode::blocking())
      : host_(device_args), tensors_(mlu::tensorArgs(host_)) {
    mlu::Workspace* workspace = nullptr;
    host_.visit([&](const mlu::ArgMeta&, auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::Workspace>) workspace = &value;
    });
    buffers_.copyIn(tensors_, workspace, pool, mode);
  }
  HostCopy(const HostCopy&) = delete;  // tensors_ points into host_
  HostCopy& operator=(const HostCopy&) = delete;

  // The op's arguments with every tensor in host memory.
  const Args& args() const { return host_; }

  // Runs the CPU reference on the copies; outputs land in them.
  mlu::Status runReference() { return mlu::reference::run(host_); }

  // Copies every output (OUT, INOUT) back into device memory (see HostBuffers::writeBack).
  void writeBack() const { buffers_.writeBack(tensors_); }

 private:
  Args host_;
  std::vector<mlu::MutableTensorArg> tensors_;  // host_'s tensors
  HostBuffers buffers_;
};

}  // namespace opscope
