#include <opscope/host_copy.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace opscope {
namespace {

void copyTo(void* device, const std::byte* host, std::size_t bytes, std::string_view name) {
  if (const mlurtStatus_t s = mlurtMemcpy(device, host, bytes, MLURT_MEMCPY_HOST_TO_DEVICE);
      s != MLURT_SUCCESS) {
    throw std::runtime_error(
        fmt::format("cannot copy {} back to the device (runtime status {})", name, static_cast<int>(s)));
  }
}

}  // namespace

BufferPool::Lease& BufferPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    block_ = std::move(other.block_);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void BufferPool::Lease::release() {
  if (pool_ != nullptr && block_) pool_->giveBack(std::move(block_), capacity_);
  block_.reset();
  pool_.reset();
  size_ = capacity_ = 0;
}

BufferPool::Lease BufferPool::acquire(std::size_t bytes) {
  Lease lease;
  if (bytes == 0) return lease;
  lease.pool_ = shared_from_this();
  lease.size_ = bytes;
  {
    std::lock_guard lock(mutex_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->capacity >= bytes && (best == free_.end() || it->capacity < best->capacity)) best = it;
    }
    if (best != free_.end()) {
      lease.block_ = std::move(best->data);
      lease.capacity_ = best->capacity;
      free_bytes_ -= best->capacity;
      free_.erase(best);
      return lease;
    }
  }
  lease.block_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
  lease.capacity_ = bytes;
  return lease;
}

void BufferPool::giveBack(std::unique_ptr<std::byte[]> data, std::size_t capacity) {
  std::lock_guard lock(mutex_);
  free_.push_back({std::move(data), capacity});
  free_bytes_ += capacity;
  auto by_capacity = [](const Block& a, const Block& b) { return a.capacity < b.capacity; };
  if (free_.size() > kMaxFree) {  // drop the smallest: the large ones are the costly ones to map again
    const auto smallest = std::min_element(free_.begin(), free_.end(), by_capacity);
    free_bytes_ -= smallest->capacity;
    free_.erase(smallest);
  }
  while (free_bytes_ > kMaxFreeBytes) {  // but keep the memory held bounded: drop the largest
    const auto largest = std::max_element(free_.begin(), free_.end(), by_capacity);
    free_bytes_ -= largest->capacity;
    free_.erase(largest);
  }
}

void HostBuffers::copyIn(const std::vector<mlu::MutableTensorArg>& tensors, mlu::Workspace* workspace,
                         BufferPool& pool, CopyMode mode) {
  for (const mlu::MutableTensorArg& t : tensors) {
    mlu::TensorView& value = *t.view;
    device_.push_back(value.data);
    BufferPool::Lease& buffer = buffers_.emplace_back(pool.acquire(value.present ? value.extentBytes() : 0));
    if (!buffer.empty()) {
      if (!t.meta.reads()) {
        std::memset(buffer.data(), 0, buffer.size());  // the reference writes it: nothing to read
      } else if (const mlurtStatus_t s =
                     mode.async
                         ? mlurtMemcpyAsync(buffer.data(), value.data, buffer.size(), mode.queue,
                                            MLURT_MEMCPY_DEVICE_TO_HOST)
                         : mlurtMemcpy(buffer.data(), value.data, buffer.size(), MLURT_MEMCPY_DEVICE_TO_HOST);
                 s != MLURT_SUCCESS) {
        if (mode.async) mlurtQueueSync(mode.queue);  // the copies queued before this one end first
        throw std::runtime_error(
            fmt::format("cannot copy {} ({} bytes at {}) from the device (runtime status {})", t.meta.name,
                        buffer.size(), value.data, static_cast<int>(s)));
      }
    }
    // An empty tensor keeps its pointer (nothing is read or written through it), so the reference's
    // argument checks see what the device's saw.
    if (value.present && !buffer.empty()) value.data = buffer.data();
  }
  if (workspace != nullptr) {
    workspace_ = pool.acquire(workspace->size);
    if (!workspace_.empty()) workspace->data = workspace_.data();
  }
}

void HostBuffers::writeBack(const std::vector<mlu::MutableTensorArg>& tensors) const {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const mlu::TensorView& value = *tensors[i].view;
    const std::string_view name = tensors[i].meta.name;
    if (!value.present || !tensors[i].meta.writes() || buffers_[i].empty()) continue;
    const BufferPool::Lease& mine = buffers_[i];
    void* target = device_[i];
    if (value.contiguous()) {
      copyTo(target, mine.data(), mine.size(), name);
      continue;
    }
    std::vector<std::byte> merged(mine.size());
    if (const mlurtStatus_t s =
            mlurtMemcpy(merged.data(), target, merged.size(), MLURT_MEMCPY_DEVICE_TO_HOST);
        s != MLURT_SUCCESS) {
      throw std::runtime_error(
          fmt::format("cannot read {} back from the device (runtime status {})", name, static_cast<int>(s)));
    }
    const auto elem = static_cast<std::int64_t>(value.elementSize());
    forEachElement(value, [&](std::int64_t, std::int64_t offset) {
      std::memcpy(merged.data() + offset * elem, mine.data() + offset * elem, static_cast<std::size_t>(elem));
    });
    copyTo(target, merged.data(), merged.size(), name);
  }
}

}  // namespace opscope
