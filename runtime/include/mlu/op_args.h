// op_args.h — the op schema (mlu/mluops_schema.h) in C++: one argument struct per op, with a visitor over
// its arguments in schema order. The kernel library's entry points, its argument checks, the device
// kernels, the CPU reference and the tools all work on these structs, so an op's arguments are described
// in exactly one place.
//
//   struct add_args {                       // from OP(add, mluopAdd, SCALAR(float, alpha) IN(a) IN(b)
//   OUT(c))
//     static constexpr std::string_view kName = "add", kSymbol = "mluopAdd";
//     float alpha; TensorView a, b, c;
//     template <typename F> void visit(F&& f);        // f(const ArgMeta&, field&) for each argument
//   };
#pragma once

#include <mlu/dtype.h>
#include <mlu/mluops.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace mlu {

// What an argument is to the op.
enum class Role : std::uint8_t { kInput, kOutput, kInOut, kScalar, kInts, kConv, kWorkspace };

// "in", "out", "inout", "scalar", "ints", "conv", "workspace" (tensor roles get a "?" when optional).
constexpr std::string_view roleName(Role role, bool optional = false) {
  switch (role) {
    case Role::kInput:
      return optional ? "in?" : "in";
    case Role::kOutput:
      return optional ? "out?" : "out";
    case Role::kInOut:
      return optional ? "inout?" : "inout";
    case Role::kScalar:
      return "scalar";
    case Role::kInts:
      return "ints";
    case Role::kConv:
      return "conv";
    case Role::kWorkspace:
      return "workspace";
  }
  return "?";
}

// Whether the op reads a tensor of this role before it runs (in, inout), and writes it (out, inout): the one
// place the library, the hook's tools and op-replay decide it.
constexpr bool reads(Role role) { return role == Role::kInput || role == Role::kInOut; }
constexpr bool writes(Role role) { return role == Role::kOutput || role == Role::kInOut; }

struct ArgMeta {
  std::string_view name;  // as in the schema: "a", "grad_output", ...
  Role role;
  bool optional = false;  // an optional tensor (absent when its descriptor and pointer are NULL)

  constexpr bool reads() const { return mlu::reads(role); }
  constexpr bool writes() const { return mlu::writes(role); }
};

// A tensor argument: a descriptor's contents and the data pointer. Strides are in elements.
struct TensorView {
  mluopDataType_t dtype = MLUOP_DTYPE_INVALID;
  mluopTensorLayout_t layout = MLUOP_LAYOUT_ARRAY;
  int ndim = 0;
  std::array<std::int64_t, MLUOP_DIM_MAX> dims{};
  std::array<std::int64_t, MLUOP_DIM_MAX> strides{};
  void* data = nullptr;
  bool present = false;  // false for an absent optional tensor

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= dims[static_cast<std::size_t>(i)];
    return n;
  }
  std::int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
  std::int64_t stride(int i) const { return strides[static_cast<std::size_t>(i)]; }
  std::size_t elementSize() const { return dtypeSize(dtype); }
  // Row-major contiguous (dims of size 1 may have any stride).
  bool contiguous() const {
    std::int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (dim(i) != 1 && stride(i) != expected) return false;
      expected *= dim(i);
    }
    return true;
  }
  // Bytes from data to one past the furthest element it addresses (0 for an empty tensor).
  std::size_t extentBytes() const {
    if (numel() == 0) return 0;
    std::int64_t last = 0;
    for (int i = 0; i < ndim; ++i) last += (dim(i) - 1) * stride(i);
    return static_cast<std::size_t>(last + 1) * elementSize();
  }
  // "[64, 1, 28, 28]"
  std::string shapeString() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(dim(i));
    return s + "]";
  }
  // Sets contiguous row-major strides for the current dims.
  void setContiguousStrides() {
    std::int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      strides[static_cast<std::size_t>(i)] = s;
      s *= dim(i);
    }
  }
};

struct ConvParams {
  std::array<int, 2> padding{0, 0};
  std::array<int, 2> stride{1, 1};
  std::array<int, 2> dilation{1, 1};
  int groups = 1;
};

struct Workspace {
  void* data = nullptr;
  std::size_t size = 0;
};

using IntList = std::vector<int>;

// One argument struct per op, generated from the schema: a field per argument, and a visitor.
#define MLUOP_FIELDS(seq) MLUOP_SEQ_END(MLUOP_FIELDS_A seq)
#define MLUOP_FIELDS_A(kind, ...) MLUOP_FIELD_##kind(__VA_ARGS__) MLUOP_FIELDS_B
#define MLUOP_FIELDS_B(kind, ...) MLUOP_FIELD_##kind(__VA_ARGS__) MLUOP_FIELDS_A
#define MLUOP_FIELDS_A_END
#define MLUOP_FIELDS_B_END
#define MLUOP_FIELD_IN(n) TensorView n;
#define MLUOP_FIELD_IN_OPT(n) TensorView n;
#define MLUOP_FIELD_OUT(n) TensorView n;
#define MLUOP_FIELD_INOUT(n) TensorView n;
#define MLUOP_FIELD_OUT_OPT(n) TensorView n;
#define MLUOP_FIELD_INOUT_OPT(n) TensorView n;
#define MLUOP_FIELD_SCALAR(type, n) type n{};
#define MLUOP_FIELD_INTS(n) IntList n;
#define MLUOP_FIELD_CONV(n) ConvParams n;
#define MLUOP_FIELD_WORKSPACE(n) Workspace n;

#define MLUOP_VISITS(seq) MLUOP_SEQ_END(MLUOP_VISITS_A seq)
#define MLUOP_VISITS_A(kind, ...) MLUOP_VISIT_##kind(__VA_ARGS__) MLUOP_VISITS_B
#define MLUOP_VISITS_B(kind, ...) MLUOP_VISIT_##kind(__VA_ARGS__) MLUOP_VISITS_A
#define MLUOP_VISITS_A_END
#define MLUOP_VISITS_B_END
#define MLUOP_VISIT_IN(n) f(ArgMeta{#n, Role::kInput, false}, n);
#define MLUOP_VISIT_IN_OPT(n) f(ArgMeta{#n, Role::kInput, true}, n);
#define MLUOP_VISIT_OUT(n) f(ArgMeta{#n, Role::kOutput, false}, n);
#define MLUOP_VISIT_INOUT(n) f(ArgMeta{#n, Role::kInOut, false}, n);
#define MLUOP_VISIT_OUT_OPT(n) f(ArgMeta{#n, Role::kOutput, true}, n);
#define MLUOP_VISIT_INOUT_OPT(n) f(ArgMeta{#n, Role::kInOut, true}, n);
#define MLUOP_VISIT_SCALAR(type, n) f(ArgMeta{#n, Role::kScalar, false}, n);
#define MLUOP_VISIT_INTS(n) f(ArgMeta{#n, Role::kInts, false}, n);
#define MLUOP_VISIT_CONV(n) f(ArgMeta{#n, Role::kConv, false}, n);
#define MLUOP_VISIT_WORKSPACE(n) f(ArgMeta{#n, Role::kWorkspace, false}, n);

#define MLUOP_DEFINE_ARGS(op, Symbol, ARGS)              \
  struct op##_args {                                     \
    static constexpr std::string_view kName = #op;       \
    static constexpr std::string_view kSymbol = #Symbol; \
    MLUOP_FIELDS(ARGS)                                   \
    template <typename F>                                \
    void visit(F&& f) {                                  \
      MLUOP_VISITS(ARGS)                                 \
    }                                                    \
    template <typename F>                                \
    void visit(F&& f) const {                            \
      MLUOP_VISITS(ARGS)                                 \
    }                                                    \
  };
MLUOP_FOR_EACH_OP(MLUOP_DEFINE_ARGS)
#undef MLUOP_DEFINE_ARGS

// A tensor argument of an op call and its place among all the op's arguments. Code that only looks at an
// op's tensors takes a list of these (tensorArgs) and need not be a template instantiated once per op.
template <typename View>  // TensorView or const TensorView
struct BasicTensorArg {
  ArgMeta meta;
  int arg_index = 0;     // position among all the op's arguments, in schema order
  View* view = nullptr;  // the field of the argument struct
};
using TensorArg = BasicTensorArg<const TensorView>;
using MutableTensorArg = BasicTensorArg<TensorView>;

// The tensor arguments of args in schema order (pointing into args: keep it alive and in place).
template <typename Args>
auto tensorArgs(Args& args) {
  using View = std::conditional_t<std::is_const_v<Args>, const TensorView, TensorView>;
  std::vector<BasicTensorArg<View>> tensors;
  int index = 0;
  args.visit([&](const ArgMeta& meta, auto& value) {
    const int arg_index = index++;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, TensorView>) {
      tensors.push_back({meta, arg_index, &value});
    }
  });
  return tensors;
}

// Calls f(args_type_tag) for each op of the schema: f.template operator()<add_args>() and so on.
template <typename F>
void forEachOp(F&& f) {
#define MLUOP_FOR_EACH_OP_CALL(op, Symbol, ARGS) f.template operator()<op##_args>();
  MLUOP_FOR_EACH_OP(MLUOP_FOR_EACH_OP_CALL)
#undef MLUOP_FOR_EACH_OP_CALL
}

// Every op of the schema as a number, in schema order: what a tool stores to find an op's argument struct
// again (an OpCall, a captured row), without a string compare per call.
enum class OpId : std::uint16_t {
#define MLUOP_OP_ID(op, Symbol, ARGS) op,
  MLUOP_FOR_EACH_OP(MLUOP_OP_ID)
#undef MLUOP_OP_ID
      kCount
};
inline constexpr std::size_t kOpCount = static_cast<std::size_t>(OpId::kCount);

// The OpId of each argument struct: opIdOf<add_args>() == OpId::add.
template <typename Args>
constexpr OpId opIdOf();
#define MLUOP_OP_ID_OF(op, Symbol, ARGS) \
  template <>                            \
  constexpr OpId opIdOf<op##_args>() {   \
    return OpId::op;                     \
  }
MLUOP_FOR_EACH_OP(MLUOP_OP_ID_OF)
#undef MLUOP_OP_ID_OF

// Calls f.template operator()<Args>() for the argument struct of op id and returns what it returns (every
// instantiation must return the same type). id must be a valid op (< OpId::kCount).
template <typename F>
decltype(auto) withOp(OpId id, F&& f) {
  switch (id) {
#define MLUOP_WITH_OP_CASE(op, Symbol, ARGS) \
  case OpId::op:                             \
    return f.template operator()<op##_args>();
    MLUOP_FOR_EACH_OP(MLUOP_WITH_OP_CASE)
#undef MLUOP_WITH_OP_CASE
    case OpId::kCount:
      break;
  }
  return f.template operator()<fill_args>();  // unreachable for a valid id
}

// The op's canonical name and C symbol by id.
inline std::string_view opName(OpId id) {
  return withOp(id, []<typename Args>() { return Args::kName; });
}
inline std::string_view opSymbol(OpId id) {
  return withOp(id, []<typename Args>() { return Args::kSymbol; });
}

// The op with this canonical name (or C symbol), if any.
inline bool findOp(std::string_view name_or_symbol, OpId* id) {
  for (std::size_t i = 0; i < kOpCount; ++i) {
    const auto candidate = static_cast<OpId>(i);
    if (opName(candidate) == name_or_symbol || opSymbol(candidate) == name_or_symbol) {
      *id = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace mlu
