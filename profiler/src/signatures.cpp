#include "signatures.h"

#include <opscope/op_format.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <unordered_map>

namespace opscope::profiler {
namespace {

// A 64-bit key of the argument metadata, in three multiply chains (each step h -> (h ^ v) * k): the
// tensors' dims go into one, their strides into another, every other word into the third, so that a
// tensor's dims and strides do not wait for each other's multiplies (one chain made each of the ~40 words
// of a 4-tensor call wait ~4 cycles for the previous one: most of the profiler's cost per call). A step is a
// bijection of h for a given v and of v for a given h, and the chains are folded by the same step, so two
// argument lists of the same shape that differ in one word never share a key; signatures are told apart by
// this key alone.
struct Hasher {
  static constexpr std::uint64_t kMul = 0x100000001b3ULL;
  std::uint64_t words = 0xcbf29ce484222325ULL, dims = 0x84222325cbf29ce4ULL, strides = 0x9e3779b97f4a7c15ULL;
  void add(std::uint64_t v) { words = (words ^ v) * kMul; }
  void addDim(std::uint64_t dim, std::uint64_t stride) {
    dims = (dims ^ dim) * kMul;
    strides = (strides ^ stride) * kMul;
  }
  std::uint64_t value() const { return (((words ^ dims) * kMul) ^ strides) * kMul; }
};

template <typename V>
constexpr bool isScalar() {
  return !std::is_same_v<V, mlu::TensorView> && !std::is_same_v<V, mlu::IntList> &&
         !std::is_same_v<V, mlu::ConvParams> && !std::is_same_v<V, mlu::Workspace>;
}

template <typename V>
std::uint64_t scalarBits(const V& value) {
  static_assert(sizeof(V) <= sizeof(std::uint64_t) && std::is_trivially_copyable_v<V>);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(V));
  return bits;
}

template <typename V>
void appendScalar(std::string& out, const V& value) {
  if constexpr (std::is_same_v<V, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<V>) {
    if (std::isfinite(value)) {
      fmt::format_to(std::back_inserter(out), "{}", value);
    } else {
      fmt::format_to(std::back_inserter(out), "\"{}\"", value);
    }
  } else if constexpr (std::is_enum_v<V>) {
    fmt::format_to(std::back_inserter(out), "{}", static_cast<long long>(value));
  } else {
    fmt::format_to(std::back_inserter(out), "{}", value);
  }
}

// The calling thread's cache of keys it has seen, for one Signatures object: a small direct-mapped table in
// front of a map of every key.
struct LocalCache {
  static constexpr std::size_t kSlots = 64;
  std::uint64_t owner = 0;  // Signatures::serial_
  std::array<std::pair<std::uint64_t, std::uint32_t>, kSlots> recent{};
  std::unordered_map<std::uint64_t, std::uint32_t> ids;
};
thread_local LocalCache t_cache;

std::atomic<std::uint64_t> g_next_serial{1};

}  // namespace

void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  // The characters that need no escape go in runs (a name seldom has one that does).
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (c != '"' && c != '\\' && u >= 0x20) continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    if (u < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", u);
    } else {
      out += '\\';
      out += c;
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

void Signatures::record(const OpCall& call, Event& e) {
  Hasher hasher;
  hasher.add(static_cast<std::uint64_t>(call.op));
  std::size_t slot = 0;
  call.withArgs([&](const auto& args) {
    args.visit([&](const mlu::ArgMeta&, const auto& value) {
      using V = std::decay_t<decltype(value)>;
      if constexpr (std::is_same_v<V, mlu::TensorView>) {
        hasher.add(static_cast<std::uint64_t>(value.present) | static_cast<std::uint64_t>(value.dtype) << 8 |
                   static_cast<std::uint64_t>(value.ndim) << 16 |
                   static_cast<std::uint64_t>(value.layout) << 24);
        for (int i = 0; i < value.ndim; ++i) {
          hasher.addDim(static_cast<std::uint64_t>(value.dim(i)),
                        static_cast<std::uint64_t>(value.stride(i)));
        }
      } else if constexpr (std::is_same_v<V, mlu::IntList>) {
        hasher.add(value.size());
        for (int v : value) hasher.add(static_cast<std::uint64_t>(static_cast<std::int64_t>(v)));
      } else if constexpr (std::is_same_v<V, mlu::ConvParams>) {
        for (int i = 0; i < 2; ++i) {
          hasher.add(static_cast<std::uint64_t>(value.padding[static_cast<std::size_t>(i)]));
          hasher.add(static_cast<std::uint64_t>(value.stride[static_cast<std::size_t>(i)]));
          hasher.add(static_cast<std::uint64_t>(value.dilation[static_cast<std::size_t>(i)]));
        }
        hasher.add(static_cast<std::uint64_t>(value.groups));
      } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
        hasher.add(value.size);
      } else {
        if (slot < kScalarSlots) {
          e.scalar[slot++] = scalarBits(value);
        } else {
          hasher.add(scalarBits(value));
        }
      }
    });
  });
  e.scalars = static_cast<std::uint8_t>(slot);
  if (t_cache.owner != serial_) {
    t_cache = LocalCache{};
    t_cache.owner = serial_;
  }
  const std::uint64_t key = hasher.value() | 1;  // 0 marks an empty slot
  auto& recent = t_cache.recent[(key >> 7) % LocalCache::kSlots];
  if (recent.first == key) {
    e.name = recent.second;
    return;
  }
  const auto it = t_cache.ids.find(key);
  e.name = it != t_cache.ids.end() ? it->second : intern(key, call);
  if (it == t_cache.ids.end()) t_cache.ids.emplace(key, e.name);
  recent = {key, e.name};
}

Signatures::Signatures() : serial_(g_next_serial.fetch_add(1)) {}

std::uint32_t Signatures::intern(std::uint64_t key, const OpCall& call) {
  (void)key;
  Signature sig;
  std::string members;               // JSON object members, each with its leading comma
  std::vector<NamedTensor> tensors;  // for the one-line form (time_measure.csv)
  std::size_t slot = 0;
  call.withArgs([&](const auto& args) {
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      using V = std::decay_t<decltype(value)>;
      if constexpr (std::is_same_v<V, mlu::TensorView>) {
        if (!value.present) return;
        // "x":"float32[4,1,28,28]" (" strides [..]" only when the tensor is not contiguous: the strides of a
        // row-major contiguous tensor follow from its shape).
        tensors.push_back({std::string(meta.name), tensorText(value)});
        members += ',';
        appendJsonString(members, meta.name);
        members += ':';
        appendJsonString(members, tensors.back().text);
      } else if constexpr (std::is_same_v<V, mlu::IntList>) {
        members += ',';
        appendJsonString(members, meta.name);
        members += ':';
        appendInts(members, value, value.size());
      } else if constexpr (std::is_same_v<V, mlu::ConvParams>) {
        members += ',';
        appendJsonString(members, meta.name);
        members += ':' + convText(value);
      } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
        members += ',';
        appendJsonString(members, fmt::format("{} bytes", meta.name));
        fmt::format_to(std::back_inserter(members), ":{}", value.size);
      } else {
        if (slot++ < kScalarSlots) return;  // in the event's slots
        members += ',';
        appendJsonString(members, meta.name);
        members += ':';
        appendScalar(members, value);
      }
    });
  });
  sig.json = std::move(members);
  sig.shapes = tensorsLine(tensors);
  std::lock_guard lock(mutex_);
  signatures_.push_back(std::move(sig));
  return static_cast<std::uint32_t>(signatures_.size() - 1);
}

Signature Signatures::get(std::uint32_t id) const {
  std::lock_guard lock(mutex_);
  return id < signatures_.size() ? signatures_[id] : Signature{};
}

void appendScalarMembers(std::string& out, mlu::OpId op, const Event& e) {
  if (e.scalars == 0) return;
  mlu::withOp(op, [&]<typename Args>() {
    const Args args{};
    std::size_t slot = 0;
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      using V = std::decay_t<decltype(value)>;
      if constexpr (isScalar<V>()) {
        if (slot >= e.scalars) return;
        V v{};
        std::memcpy(&v, &e.scalar[slot++], sizeof(V));
        out += ',';
        appendJsonString(out, meta.name);
        out += ':';
        appendScalar(out, v);
      }
    });
  });
}

}  // namespace opscope::profiler
