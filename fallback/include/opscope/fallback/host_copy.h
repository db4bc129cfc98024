// host_copy.h — an op's tensors copied out of device memory, and the CPU reference run on the copies: what
// fallback runs instead of the device, and what auto-compare checks the device against.
//
// Each present tensor is copied as its whole extent (from its first element to one past its last, strides
// kept), so the reference sees exactly the layout the device would. The caller syncs the op's queue first.
// Inside libopscope.so the copies go through the hook's own mlurt* symbols with the recursion guard set
// (so only runtime calls the hook wraps may be used here: libopscope.so links no runtime library).
#pragma once

#include <opscope/tensor_snapshot.h>

#include <mlu/mlurt.h>
#include <mlu/op_args.h>
#include <mlu/reference.h>
#include <mlu/status.h>

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace opscope::fallback {

// Whether an argument is written by the op.
constexpr bool isOutput(mlu::Role role) { return role == mlu::Role::kOutput || role == mlu::Role::kInOut; }

template <typename Args>
class HostCopy {
 public:
  // Copies every present tensor of device_args to host memory. Throws std::runtime_error when the runtime
  // refuses a copy (a pointer that is not device memory).
  explicit HostCopy(const Args& device_args) : host_(device_args) {
    host_.visit([&](const mlu::ArgMeta& meta, auto& value) {
      using V = std::decay_t<decltype(value)>;
      if constexpr (std::is_same_v<V, mlu::TensorView>) {
        device_.push_back(value.data);
        auto& buffer = buffers_.emplace_back(value.present ? value.extentBytes() : 0);
        if (!buffer.empty()) {
          if (const mlurtStatus_t s =
                  mlurtMemcpy(buffer.data(), value.data, buffer.size(), MLURT_MEMCPY_DEVICE_TO_HOST);
              s != MLURT_SUCCESS) {
            throw std::runtime_error(
                fmt::format("cannot copy {} ({} bytes at {}) from the device (runtime status {})", meta.name,
                            buffer.size(), value.data, static_cast<int>(s)));
          }
        }
        // An empty tensor keeps its pointer (nothing is read or written through it), so the reference's
        // argument checks see what the device's saw.
        if (value.present && !buffer.empty()) value.data = buffer.data();
      } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
        workspace_.resize(value.size);
        if (!workspace_.empty()) value.data = workspace_.data();
      }
    });
  }
  HostCopy(const HostCopy&) = delete;
  HostCopy& operator=(const HostCopy&) = delete;

  // The op's arguments with every tensor in host memory.
  const Args& args() const { return host_; }

  // Runs the CPU reference on the copies; outputs land in them.
  mlu::Status runReference() { return mlu::reference::run(host_); }

  // Copies every output (OUT, INOUT) back into device memory. A contiguous output is written as a whole;
  // a strided one element by element into a fresh copy of its device extent, so memory between its
  // elements (another output, or data the op does not own) keeps what the device holds now.
  void writeBack() const {
    std::size_t index = 0;
    host_.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
        const std::size_t i = index++;
        if (!value.present || !isOutput(meta.role) || buffers_[i].empty()) return;
        const std::vector<std::byte>& mine = buffers_[i];
        void* target = device_[i];
        if (value.contiguous()) {
          copyTo(target, mine.data(), mine.size(), meta.name);
          return;
        }
        std::vector<std::byte> merged(mine.size());
        if (const mlurtStatus_t s =
                mlurtMemcpy(merged.data(), target, merged.size(), MLURT_MEMCPY_DEVICE_TO_HOST);
            s != MLURT_SUCCESS) {
          throw std::runtime_error(fmt::format("cannot read {} back from the device (runtime status {})",
                                               meta.name, static_cast<int>(s)));
        }
        const auto elem = static_cast<std::int64_t>(value.elementSize());
        forEachElement(value, [&](std::int64_t, std::int64_t offset) {
          std::memcpy(merged.data() + offset * elem, mine.data() + offset * elem,
                      static_cast<std::size_t>(elem));
        });
        copyTo(target, merged.data(), merged.size(), meta.name);
      }
    });
  }

 private:
  static void copyTo(void* device, const std::byte* host, std::size_t bytes, std::string_view name) {
    if (const mlurtStatus_t s = mlurtMemcpy(device, host, bytes, MLURT_MEMCPY_HOST_TO_DEVICE);
        s != MLURT_SUCCESS) {
      throw std::runtime_error(
          fmt::format("cannot copy {} back to the device (runtime status {})", name, static_cast<int>(s)));
    }
  }

  Args host_;
  std::vector<void*> device_;                    // each tensor's device pointer, in visit order
  std::vector<std::vector<std::byte>> buffers_;  // each tensor's host extent, in visit order
  std::vector<std::byte> workspace_;
};

}  // namespace opscope::fallback
