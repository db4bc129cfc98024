// tensor_ops.cpp — the ops every PyTorch backend implements itself: allocation (empty, empty_strided),
// copies between host and device and on the device (_copy_from), resize_, the view ops whose kernels are
// per backend (view, as_strided, _reshape_alias, unfold), fill_/zero_ and reading a scalar back.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/SymIntArrayRef.h>
#include <torch/library.h>

#include "mlu_context.h"
#include "streams.h"

#include <memory>

namespace torch_mlu {
namespace {

constexpr c10::DispatchKeySet kMluKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex deviceIndex(c10::optional<c10::Device> device) {
  if (device.has_value() && device->has_index()) return device->index();
  return static_cast<c10::DeviceIndex>(currentDevice());
}

at::Tensor empty(c10::SymIntArrayRef size, c10::optional<at::ScalarType> dtype,
                 c10::optional<at::Layout> layout, c10::optional<c10::Device> device,
                 c10::optional<bool> /*pin_memory*/, c10::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "torch_mlu: only strided tensors, not ",
              *layout);
  const c10::DeviceGuard guard(c10::Device(kDeviceType, deviceIndex(device)));
  return at::detail::empty_generic(c10::asIntArrayRefSlow(size), c10::GetAllocator(kDeviceType), kMluKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor emptyStrided(c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                        c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                        c10::optional<c10::Device> device, c10::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "torch_mlu: only strided tensors, not ",
              *layout);
  const c10::DeviceGuard guard(c10::Device(kDeviceType, deviceIndex(device)));
  return at::detail::empty_strided_generic(c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride),
                                           c10::GetAllocator(kDeviceType), kMluKeys,
                                           c10::dtype_or_default(dtype));
}

// Whether t's elements fill its memory densely in row-major order from its data pointer.
bool denseRowMajor(const at::Tensor& t) { return t.is_contiguous(); }

// A copy between the host and the device on the current stream of the current device, done when it
// returns (the host reads or may reuse its side): on the default stream the runtime's synchronous copy, on
// another an asynchronous one on its queue, waited for.
void memcpyBytes(void* dst, const void* src, size_t bytes, mlurtMemcpyKind_t kind) {
  if (bytes == 0) return;
  const int device = currentDevice();
  const c10::StreamId stream = currentStreamId(device);
  if (stream == 0) {
    checkRuntime(mlurtMemcpy(dst, src, bytes, kind), "mlurtMemcpy");
    return;
  }
  mlurtQueue_t queue = queueOf(device, stream);
  checkRuntime(mlurtMemcpyAsync(dst, src, bytes, queue, kind), "mlurtMemcpyAsync");
  checkRuntime(mlurtQueueSync(queue), "mlurtQueueSync");
}

// Device to device, any strides and dtypes the kernel library's copy takes: queued on the current stream
// like a kernel, not waited for (the host reads neither side; as CUDA's copy_ on the device).
void copyOnDevice(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.scalar_type() == dst.scalar_type() && denseRowMajor(src) && denseRowMajor(dst)) {
    checkRuntime(mlurtMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                  queueOf(currentDevice(), currentStreamId(currentDevice())),
                                  MLURT_MEMCPY_DEVICE_TO_DEVICE),
                 "mlurtMemcpyAsync");
    return;
  }
  const Descriptor s(src);
  const Descriptor d(dst);
  checkOps(mluopCopy(handle(), s.get(), src.data_ptr(), d.get(), dst.data_ptr()), "copy");
}

// The host function that releases a queued copy's source (queueCopyFromHost).
void releaseHostTensor(void* tensor) { std::unique_ptr<at::Tensor> owned(static_cast<at::Tensor*>(tensor)); }

// host (dense, dst's dtype, nobody else's) -> the dense device memory at dst, on the current stream.
void queueDenseCopy(void* dst, at::Tensor host, size_t bytes) {
  if (bytes == 0) return;
  mlurtQueue_t queue = queueOf(currentDevice(), currentStreamId(currentDevice()));
  checkRuntime(mlurtMemcpyAsync(dst, host.data_ptr(), bytes, queue, MLURT_MEMCPY_HOST_TO_DEVICE),
               "mlurtMemcpyAsync");
  auto keep = std::make_unique<at::Tensor>(std::move(host));
  if (mlurtLaunchHostFunc(queue, releaseHostTensor, keep.get()) == MLURT_SUCCESS) {
    keep.release();  // the queue's host function owns it now
    return;
  }
  // The queue took the copy but not the release: wait for the copy here, then release.
  checkRuntime(mlurtQueueSync(queue), "mlurtQueueSync");
}

}  // namespace

void queueCopyFromHost(const at::Tensor& dst, at::Tensor host) {
  TORCH_CHECK(isMlu(dst) && !isMlu(host) && host.sizes() == dst.sizes(),
              "torch_mlu: queueCopyFromHost takes an MLU tensor and a host tensor of its sizes");
  if (dst.numel() == 0) return;
  const c10::DeviceGuard guard(dst.device());
  if (host.scalar_type() != dst.scalar_type() || !host.is_contiguous()) {
    host = host.to(dst.scalar_type()).contiguous();
  }
  if (denseRowMajor(dst)) {
    queueDenseCopy(dst.data_ptr(), std::move(host), dst.nbytes());
    return;
  }
  const at::Tensor staged = at::empty(dst.sizes(), dst.options().memory_format(at::MemoryFormat::Contiguous));
  queueDenseCopy(staged.data_ptr(), std::move(host), staged.nbytes());
  copyOnDevice(staged, dst);
}

namespace {

// self -> dst, where either may be on the CPU or the MLU (PyTorch's copy_ sends every copy that involves
// an MLU tensor here). Host data is made dense in the destination's dtype on the host; device data is
// made dense on the device, so that the transfer itself is one mlurtMemcpy.
at::Tensor copyFrom(const at::Tensor& source, const at::Tensor& dst, bool non_blocking) {
  if (dst.numel() == 0) return dst;
  // copy_ broadcasts the source to the destination's shape (expand_as says so when it cannot).
  const at::Tensor self = source.sizes() == dst.sizes() ? source : source.expand_as(dst);
  if (isMlu(self) && isMlu(dst)) {
    const c10::DeviceGuard guard(dst.device());
    if (self.device() == dst.device()) {
      copyOnDevice(self, dst);
    } else {
      // Between two devices: through the host (the simulated devices share no link).
      at::Tensor host = self.to(at::kCPU);
      dst.copy_(host);
    }
    return dst;
  }
  if (isMlu(dst)) {  // host -> device
    const c10::DeviceGuard guard(dst.device());
    at::Tensor host = self.to(dst.scalar_type()).contiguous();
    if (non_blocking) {
      // Queued on the current stream, not waited for: from a snapshot of the source taken now, so the
      // caller may reuse its tensor at once (CUDA asks for pinned memory and the caller's care instead).
      if (host.storage().is_alias_of(self.storage())) host = host.clone();
      queueCopyFromHost(dst, std::move(host));
      return dst;
    }
    if (denseRowMajor(dst)) {
      memcpyBytes(dst.data_ptr(), host.data_ptr(), dst.nbytes(), MLURT_MEMCPY_HOST_TO_DEVICE);
    } else {
      at::Tensor staged = at::empty(dst.sizes(), dst.options().memory_format(at::MemoryFormat::Contiguous));
      memcpyBytes(staged.data_ptr(), host.data_ptr(), staged.nbytes(), MLURT_MEMCPY_HOST_TO_DEVICE);
      copyOnDevice(staged, dst);
    }
    return dst;
  }
  // device -> host
  const c10::DeviceGuard guard(self.device());
  at::Tensor dense = denseRowMajor(self) ? self : self.contiguous();
  if (dst.is_contiguous() && dst.scalar_type() == self.scalar_type()) {
    memcpyBytes(dst.data_ptr(), dense.data_ptr(), dst.nbytes(), MLURT_MEMCPY_DEVICE_TO_HOST);
    return dst;
  }
  at::Tensor host = at::empty(dense.sizes(), dense.options().device(at::kCPU));
  memcpyBytes(host.data_ptr(), dense.data_ptr(), host.nbytes(), MLURT_MEMCPY_DEVICE_TO_HOST);
  dst.copy_(host);
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copyFrom(self, dst, false);
}

// resize_: new sizes, contiguous strides; the storage grows (its old bytes kept) when it is too small.
const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::optional<at::MemoryFormat> memory_format) {
  const at::IntArrayRef sizes = c10::asIntArrayRefSlow(size);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(sizes);
  const int64_t needed = (impl->numel() + impl->storage_offset()) * static_cast<int64_t>(self.itemsize());
  c10::Storage storage = impl->storage();  // a handle: changes below are the tensor's storage's
  if (needed > static_cast<int64_t>(storage.nbytes())) {
    TORCH_CHECK(storage.resizable(), "torch_mlu: resize_ of a tensor whose storage cannot grow");
    const c10::DeviceGuard guard(self.device());
    c10::DataPtr grown = storage.allocator()->allocate(needed);
    if (storage.nbytes() > 0) {
      memcpyBytes(grown.get(), storage.data(), storage.nbytes(), MLURT_MEMCPY_DEVICE_TO_DEVICE);
    }
    storage.set_data_ptr_noswap(std::move(grown));
    storage.set_nbytes(needed);
  }
  if (memory_format.has_value()) impl->empty_tensor_restride(*memory_format);
  return self;
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, c10::asIntArrayRefSlow(size));
}

at::Tensor asStrided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                     c10::optional<c10::SymInt> offset) {
  c10::optional<int64_t> storage_offset;
  if (offset.has_value()) storage_offset = offset->expect_int();
  return at::native::as_strided_tensorimpl(self, c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride),
                                           storage_offset);
}

at::Tensor reshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride));
}

at::Tensor& fill(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  const c10::DeviceGuard guard(self.device());
  const Descriptor y(self);
  checkOps(mluopFill(handle(), value.toDouble(), y.get(), self.data_ptr()), "fill");
  return self;
}

at::Tensor& zero(at::Tensor& self) { return fill(self, 0); }

at::Scalar localScalarDense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  const c10::DeviceGuard guard(self.device());
  memcpyBytes(host.data_ptr(), self.data_ptr(), self.itemsize(), MLURT_MEMCPY_DEVICE_TO_HOST);
  return host.item();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(emptyStrided));
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("view", TORCH_FN(view));
  m.impl("as_strided", TORCH_FN(asStrided));
  m.impl("_reshape_alias", TORCH_FN(reshapeAlias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("fill_.Scalar", TORCH_FN(fill));
  m.impl("zero_", TORCH_FN(zero));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));
}

// A tensor marked conjugate or negative is copied by materializing the bit first (PyTorch's fallbacks
// for those keys); without a fallthrough here _copy_from would come back to them forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }
TORCH_LIBRARY_IMPL(aten, Negative, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }

}  // namespace
}  // namespace torch_mlu
