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

#include <cstddef>
#include <type_traits>
#include <vector>

namespace opscope::fallback {

// Whether an argument is written by the op.
constexpr bool isOutput(mlu::Role role) { return role == mlu::Role::kOutput || role == mlu::Role::kInOut; }

// The part of a HostCopy that does not depend on the op (fallback/src/host_copy.cpp: compiled once, not
// once per op): the host buffers of an op's tensors and the copies between them and the device.
class HostBuffers {
 public:
  // Copies each present tensor's whole extent to a host buffer and points its view there; gives the
  // workspace (when there is one) a host buffer of its size. Throws std::runtime_error when the runtime
  // refuses a copy (a pointer that is not device memory).
  void copyIn(const std::vector<mlu::MutableTensorArg>& tensors, mlu::Workspace* workspace);

  // Copies every output (OUT, INOUT) back to the device pointer its view had before copyIn. A contiguous
  // output is written as a whole; a strided one element by element into a fresh copy of its device extent,
  // so memory between its elements (another output, or data the op does not own) keeps what the device
  // holds now.
  void writeBack(const std::vector<mlu::MutableTensorArg>& tensors) const;

 private:
  std::vector<void*> device_;                    // each tensor's device pointer, in schema order
  std::vector<std::vector<std::byte>> buffers_;  // each tensor's host extent, in schema order
  std::vector<std::byte> workspace_;
};

template <typename Args>
class HostCopy {
 public:
  // Copies every present tensor of device_args to host memory. Throws std::runtime_error when the runtime
  // refuses a copy (a pointer that is not device memory).
  explicit HostCopy(const Args& device_args) : host_(device_args), tensors_(mlu::tensorArgs(host_)) {
    mlu::Workspace* workspace = nullptr;
    host_.visit([&](const mlu::ArgMeta&, auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::Workspace>) workspace = &value;
    });
    buffers_.copyIn(tensors_, workspace);
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

}  // namespace opscope::fallback
