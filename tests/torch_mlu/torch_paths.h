// torch_paths.h — the Python the PyTorch tests run (/usr/bin/python3: Debian's, with python3-torch) and
// the folder of the built torch_mlu package.
#pragma once

namespace torch_test {
extern const char* const kPython;
extern const char* const kPythonPath;
}  // namespace torch_test
