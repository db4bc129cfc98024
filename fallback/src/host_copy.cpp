#include <opscope/fallback/host_copy.h>

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

namespace opscope::fallback {
namespace {

void copyTo(void* device, const std::byte* host, std::size_t bytes, std::string_view name) {
  if (const mlurtStatus_t s = mlurtMemcpy(device, host, bytes, MLURT_MEMCPY_HOST_TO_DEVICE);
      s != MLURT_SUCCESS) {
    throw std::runtime_error(
        fmt::format("cannot copy {} back to the device (runtime status {})", name, static_cast<int>(s)));
  }
}

}  // namespace

void HostBuffers::copyIn(const std::vector<mlu::MutableTensorArg>& tensors, mlu::Workspace* workspace) {
  for (const mlu::MutableTensorArg& t : tensors) {
    mlu::TensorView& value = *t.view;
    device_.push_back(value.data);
    auto& buffer = buffers_.emplace_back(value.present ? value.extentBytes() : 0);
    if (!buffer.empty()) {
      if (const mlurtStatus_t s =
              mlurtMemcpy(buffer.data(), value.data, buffer.size(), MLURT_MEMCPY_DEVICE_TO_HOST);
          s != MLURT_SUCCESS) {
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
    workspace_.resize(workspace->size);
    if (!workspace_.empty()) workspace->data = workspace_.data();
  }
}

void HostBuffers::writeBack(const std::vector<mlu::MutableTensorArg>& tensors) const {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const mlu::TensorView& value = *tensors[i].view;
    const std::string_view name = tensors[i].meta.name;
    if (!value.present || !isOutput(tensors[i].meta.role) || buffers_[i].empty()) continue;
    const std::vector<std::byte>& mine = buffers_[i];
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

}  // namespace opscope::fallback
