#include <opscope/device_run.h>
#include <opscope/own_memory.h>
#include <opscope/runtime_access.h>

#include <mlu/op_invoke.h>

#include <fmt/format.h>

#include <stdexcept>
#include <utility>
#include <vector>

namespace opscope {
namespace {

// The real library's descriptor functions, looked up once.
struct DescriptorFunctions {
  decltype(&mluopCreateTensorDescriptor) create_tensor =
      requiredRuntimeFunction<decltype(&mluopCreateTensorDescriptor)>("mluopCreateTensorDescriptor");
  decltype(&mluopSetTensorDescriptorEx) set_tensor =
      requiredRuntimeFunction<decltype(&mluopSetTensorDescriptorEx)>("mluopSetTensorDescriptorEx");
  decltype(&mluopDestroyTensorDescriptor) destroy_tensor =
      requiredRuntimeFunction<decltype(&mluopDestroyTensorDescriptor)>("mluopDestroyTensorDescriptor");
  decltype(&mluopCreateConvolutionDescriptor) create_conv =
      requiredRuntimeFunction<decltype(&mluopCreateConvolutionDescriptor)>(
          "mluopCreateConvolutionDescriptor");
  decltype(&mluopSetConvolutionDescriptor) set_conv =
      requiredRuntimeFunction<decltype(&mluopSetConvolutionDescriptor)>("mluopSetConvolutionDescriptor");
  decltype(&mluopDestroyConvolutionDescriptor) destroy_conv =
      requiredRuntimeFunction<decltype(&mluopDestroyConvolutionDescriptor)>(
          "mluopDestroyConvolutionDescriptor");
};

const DescriptorFunctions& descriptorFunctions() {
  static const DescriptorFunctions functions;
  return functions;
}

// The descriptors of one call (op_invoke.h's argument macros ask for tensor() and conv()), destroyed after
// it.
class RealDescriptors {
 public:
  RealDescriptors() : f_(descriptorFunctions()) {}
  RealDescriptors(const RealDescriptors&) = delete;
  RealDescriptors& operator=(const RealDescriptors&) = delete;
  ~RealDescriptors() {
    for (auto d : tensors_) f_.destroy_tensor(d);
    for (auto d : convs_) f_.destroy_conv(d);
  }
  mluopTensorDescriptor_t tensor(const mlu::TensorView& t) {
    if (!t.present) return nullptr;
    mluopTensorDescriptor_t d = nullptr;
    if (f_.create_tensor(&d) != MLUOP_STATUS_SUCCESS)
      throw std::runtime_error("cannot make a tensor descriptor");
    tensors_.push_back(d);
    f_.set_tensor(d, t.layout, t.dtype, t.ndim, t.dims.data(), t.strides.data());
    return d;
  }
  mluopConvolutionDescriptor_t conv(const mlu::ConvParams& p) {
    mluopConvolutionDescriptor_t d = nullptr;
    if (f_.create_conv(&d) != MLUOP_STATUS_SUCCESS)
      throw std::runtime_error("cannot make a convolution descriptor");
    convs_.push_back(d);
    f_.set_conv(d, p.padding.data(), p.stride.data(), p.dilation.data(), p.groups);
    return d;
  }

 private:
  const DescriptorFunctions& f_;
  std::vector<mluopTensorDescriptor_t> tensors_;
  std::vector<mluopConvolutionDescriptor_t> convs_;
};

#define OPSCOPE_DEFINE_REAL_INVOKE(op, Symbol, ARGS)                            \
  mluopStatus_t realInvoke(mluopHandle_t handle, const mlu::op##_args& a_) {    \
    static const auto fn = requiredRuntimeFunction<decltype(&Symbol)>(#Symbol); \
    RealDescriptors d_;                                                         \
    return fn(handle MLU_INVOKE_ARGS(ARGS));                                    \
  }
MLUOP_FOR_EACH_OP(OPSCOPE_DEFINE_REAL_INVOKE)
#undef OPSCOPE_DEFINE_REAL_INVOKE

}  // namespace

mluopStatus_t invokeOnDevice(mluopHandle_t handle, mlu::OpId op, const void* args) {
  return mlu::withOp(op,
                     [&]<typename Args>() { return realInvoke(handle, *static_cast<const Args*>(args)); });
}

std::string lastDeviceError() {
  static const auto fn = realRuntimeFunction<decltype(&mluopGetLastErrorMessage)>("mluopGetLastErrorMessage");
  const char* message = fn != nullptr ? fn() : nullptr;
  return message != nullptr ? message : "";
}

DeviceScratch::DeviceScratch(int device, std::size_t bytes) : device_(device) {
  if (bytes == 0) return;
  static const auto malloc_fn = requiredRuntimeFunction<decltype(&mlurtMalloc)>("mlurtMalloc");
  if (const mlurtStatus_t s = malloc_fn(&data_, bytes); s != MLURT_SUCCESS) {
    data_ = nullptr;
    throw std::runtime_error(fmt::format("cannot allocate {} bytes of device memory (runtime status {})",
                                         bytes, static_cast<int>(s)));
  }
  size_ = bytes;
  addOwnDeviceBytes(device_, static_cast<std::int64_t>(size_));
}

DeviceScratch& DeviceScratch::operator=(DeviceScratch&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
  }
  return *this;
}

void DeviceScratch::release() {
  if (data_ == nullptr) return;
  static const auto free_fn = requiredRuntimeFunction<decltype(&mlurtFree)>("mlurtFree");
  free_fn(data_);
  addOwnDeviceBytes(device_, -static_cast<std::int64_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

}  // namespace opscope
