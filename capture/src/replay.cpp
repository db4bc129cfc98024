#include <opscope/capture/replay.h>
#include <opscope/rundb/capture_args.h>
#include <opscope/tensor_snapshot.h>

#include <mlu/mluops.h>
#include <mlu/mlurt.h>
#include <mlu/op_invoke.h>
#include <mlu/reference.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace opscope::capture {

using rundb::tensorRecord;
namespace {

// Memory for one tensor: device memory (MLU) or host memory (CPU reference).
class Buffer {
 public:
  Buffer(bool device, std::size_t bytes) : device_(device), bytes_(bytes) {
    if (bytes == 0) return;
    if (device) {
      if (mlurtMalloc(&data_, bytes) != MLURT_SUCCESS) {
        throw std::runtime_error(
            fmt::format("cannot allocate {} bytes of device memory: {}", bytes, mlurtGetLastErrorMessage()));
      }
    } else {
      host_.resize(bytes);
      data_ = host_.data();
    }
  }
  ~Buffer() {
    if (device_ && data_ != nullptr) mlurtFree(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return data_; }

  void upload(const std::vector<std::byte>& bytes) {
    if (bytes.empty()) return;
    if (bytes.size() > bytes_) {
      throw std::runtime_error(fmt::format("{} bytes do not fit a buffer of {}", bytes.size(), bytes_));
    }
    if (device_) {
      if (mlurtMemcpy(data_, bytes.data(), bytes.size(), MLURT_MEMCPY_HOST_TO_DEVICE) != MLURT_SUCCESS) {
        throw std::runtime_error(fmt::format("copy to the device failed: {}", mlurtGetLastErrorMessage()));
      }
    } else {
      std::memcpy(data_, bytes.data(), bytes.size());
    }
  }

 private:
  bool device_;
  std::size_t bytes_;
  void* data_ = nullptr;
  std::vector<std::byte> host_;
};

// Packed elements laid out with the tensor's strides (the inverse of packTensor), in a buffer of its extent.
std::vector<std::byte> unpack(const mlu::TensorView& t, const Bytes& packed) {
  std::vector<std::byte> out(t.extentBytes());
  const std::size_t elem = t.elementSize();
  const std::int64_t n = t.numel();
  if (packed.size() != static_cast<std::size_t>(n) * elem) {  // the reader refuses these already
    throw std::runtime_error(fmt::format("a tensor of {} elements has {} bytes of data", n, packed.size()));
  }
  if (n == 0) return out;
  if (t.contiguous()) {
    std::memcpy(out.data(), packed.data(), packed.size());
    return out;
  }
  const auto e = static_cast<std::int64_t>(elem);
  forEachElement(t, [&](std::int64_t i, std::int64_t offset) {
    std::memcpy(out.data() + offset * e, packed.data() + i * e, elem);
  });
  return out;
}

const std::string* scalarText(const CapturedOp& op, std::string_view name) {
  for (const auto& [n, v] : op.scalars) {
    if (n == name) return &v;
  }
  return nullptr;
}

template <typename T>
T parseScalar(const std::string& text, std::string_view name) {
  char* end = nullptr;
  T value{};
  errno = 0;
  if constexpr (std::is_same_v<T, bool>) {
    value = std::strtol(text.c_str(), &end, 10) != 0;
  } else if constexpr (std::is_same_v<T, float>) {
    value = std::strtof(text.c_str(), &end);
  } else if constexpr (std::is_same_v<T, double>) {
    value = std::strtod(text.c_str(), &end);
  } else if constexpr (std::is_unsigned_v<T>) {
    value = static_cast<T>(std::strtoull(text.c_str(), &end, 10));
  } else {
    value = static_cast<T>(std::strtoll(text.c_str(), &end, 10));
  }
  if (text.empty() || *end != '\0')
    throw std::runtime_error(fmt::format("scalar {} = '{}' is malformed", name, text));
  return value;
}

}  // namespace

struct Replayer::DeviceContext {
  int device = 0;
  mlurtQueue_t queue = nullptr;
  mluopHandle_t handle = nullptr;
  explicit DeviceContext(int d) : device(d) {
    if (mlurtSetDevice(d) != MLURT_SUCCESS) {
      throw std::runtime_error(fmt::format("cannot use device {}: {}", d, mlurtGetLastErrorMessage()));
    }
    if (mlurtQueueCreate(&queue) != MLURT_SUCCESS || mluopCreate(&handle) != MLUOP_STATUS_SUCCESS ||
        mluopSetQueue(handle, queue) != MLUOP_STATUS_SUCCESS) {
      throw std::runtime_error(fmt::format("cannot set up device {}: {}", d, mlurtGetLastErrorMessage()));
    }
  }
  ~DeviceContext() {
    if (handle != nullptr) mluopDestroy(handle);
    if (queue != nullptr) mlurtQueueDestroy(queue);
  }
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
};

Replayer::Replayer(ReplayDevice device) : device_(device) {}
Replayer::~Replayer() = default;

Replayer::DeviceContext& Replayer::context(int device) {
  int count = 0;
  mlurtGetDeviceCount(&count);
  if (device < 0 || device >= count) device = 0;  // captured on a device this machine does not simulate
  auto& slot = contexts_[device];
  if (!slot) slot = std::make_unique<DeviceContext>(device);
  mlurtSetDevice(device);
  return *slot;
}

ReplayResult Replayer::run(const CapturedOp& op, bool device_time) {
  ReplayResult result;
  if (op.status != MLUOP_STATUS_SUCCESS) {
    result.error = fmt::format("the captured call failed (status {}); there is nothing to replay", op.status);
    return result;
  }
  if (!op.captured) {
    result.error =
        "its tensors were not captured: capture.db holds only its statistics or compare results "
        "(OP_CAPTURE_MODE=stats keeps whole tensors only for the calls around a trigger; op-replay --list "
        "shows the ops it can run)";
    return result;
  }
  const bool on_device = device_ == ReplayDevice::kMlu;
  try {
    mlu::withOp(op.op, [&]<typename Args>() {
      Args args;
      std::vector<std::unique_ptr<Buffer>> buffers;
      std::vector<std::pair<const mlu::TensorView*, std::string>> outputs;  // view, arg name
      std::vector<int> output_index;
      int index = 0;
      args.visit([&](const mlu::ArgMeta& meta, auto& value) {
        const int ai = index++;
        using V = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<V, mlu::TensorView>) {
          const TensorRecord* in = op.find("input", ai);
          const TensorRecord* out = op.find("output", ai);
          const TensorRecord* shape = in != nullptr ? in : out;
          if (shape == nullptr) {
            if (!meta.optional) {
              throw std::runtime_error(fmt::format("the capture has no tensor for argument {}", meta.name));
            }
            return;  // an absent optional tensor
          }
          if (in != nullptr && out != nullptr && (in->dtype != out->dtype || in->shape != out->shape)) {
            throw std::runtime_error(fmt::format(
                "the capture's input and output of argument {} disagree on dtype or shape", meta.name));
          }
          if (shape->shape.size() > static_cast<std::size_t>(MLUOP_DIM_MAX) ||
              shape->strides.size() != shape->shape.size()) {  // the reader refuses these already
            throw std::runtime_error(fmt::format("argument {} has a malformed shape or strides", meta.name));
          }
          value.dtype = shape->dtype;
          value.layout = shape->layout;
          value.ndim = static_cast<int>(shape->shape.size());
          for (int d = 0; d < value.ndim; ++d) {
            value.dims[static_cast<std::size_t>(d)] = shape->shape[static_cast<std::size_t>(d)];
            value.strides[static_cast<std::size_t>(d)] = shape->strides[static_cast<std::size_t>(d)];
          }
          value.present = true;
          auto buffer = std::make_unique<Buffer>(on_device, value.extentBytes());
          if (in != nullptr) {
            buffer->upload(unpack(value, in->data));
          } else {
            buffer->upload(std::vector<std::byte>(value.extentBytes()));
          }
          value.data = buffer->data();
          buffers.push_back(std::move(buffer));
          if (meta.writes()) {
            outputs.emplace_back(&value, std::string(meta.name));
            output_index.push_back(ai);
          }
        } else {
          const std::string* text = scalarText(op, meta.name);
          if (text == nullptr)
            throw std::runtime_error(fmt::format("the capture has no value for {}", meta.name));
          if constexpr (std::is_same_v<V, mlu::IntList>) {
            value = nlohmann::json::parse(*text).get<std::vector<int>>();
          } else if constexpr (std::is_same_v<V, mlu::ConvParams>) {
            const auto j = nlohmann::json::parse(*text);
            for (int k = 0; k < 2; ++k) {
              value.padding[static_cast<std::size_t>(k)] = j.at("padding").at(k).get<int>();
              value.stride[static_cast<std::size_t>(k)] = j.at("stride").at(k).get<int>();
              value.dilation[static_cast<std::size_t>(k)] = j.at("dilation").at(k).get<int>();
            }
            value.groups = j.at("groups").get<int>();
          } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
            value.size = parseScalar<std::size_t>(*text, meta.name);
            auto buffer = std::make_unique<Buffer>(on_device, value.size);
            value.data = buffer->data();
            buffers.push_back(std::move(buffer));
          } else {
            value = parseScalar<V>(*text, meta.name);
          }
        }
      });

      const auto start = std::chrono::steady_clock::now();
      if (on_device) {
        DeviceContext& ctx = context(op.device);
        mlurtNotifier_t begin = nullptr, end = nullptr;
        if (device_time) {
          mlurtNotifierCreate(&begin, 0);
          mlurtNotifierCreate(&end, 0);
          mlurtPlaceNotifier(begin, ctx.queue);
        }
        const mluopStatus_t status = mlu::invoke(ctx.handle, args);
        if (device_time) mlurtPlaceNotifier(end, ctx.queue);
        const mlurtStatus_t sync = mlurtQueueSync(ctx.queue);
        result.elapsed_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (device_time) {
          float ms = 0;
          if (mlurtNotifierElapsedTime(&ms, begin, end) == MLURT_SUCCESS) result.elapsed_ms = ms;
          mlurtNotifierDestroy(begin);
          mlurtNotifierDestroy(end);
        }
        if (status != MLUOP_STATUS_SUCCESS) {
          result.error = fmt::format("{} failed: {}", op.name, mluopGetLastErrorMessage());
          return;
        }
        if (sync != MLURT_SUCCESS) {
          result.error = fmt::format("{} failed on the device: {}", op.name, mlurtGetLastErrorMessage());
          return;
        }
      } else {
        const mlu::Status status = mlu::reference::run(args);
        result.elapsed_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (!status.ok()) {
          result.error = fmt::format("{} (CPU reference) failed: {}", op.name, status.message);
          return;
        }
      }
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        const mlu::TensorView& v = *outputs[i].first;
        result.outputs.push_back(tensorRecord("output", output_index[i], outputs[i].second, v,
                                              on_device ? snapshotTensor(v) : packTensor(v, v.data)));
      }
      result.ok = true;
    });
  } catch (const nlohmann::json::exception& e) {
    result.ok = false;
    result.error = fmt::format("a scalar of the capture is malformed: {}", e.what());
  } catch (const std::exception& e) {
    result.ok = false;
    result.error = e.what();
  }
  return result;
}

}  // namespace opscope::capture
