// describe.h — an op call's arguments as text, one "opscope:   role name: ..." line per argument (role,
// dtype, shape, strides, layout, contiguity and device pointer of tensors; values of scalars).
#pragma once

#include <opscope/op_call.h>

#include <string>

namespace opscope {

// Empty when call.args_ok is false.
std::string describeArguments(const OpCall& call);

}  // namespace opscope
