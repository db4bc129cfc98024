// made_up_call.h — an op call made up on real device memory, for testing a tool in-process: the test links
// the runtime and calls the tool's before()/after() itself, as the hook would, with no LD_PRELOAD.
#pragma once

#include <opscope/op_call.h>
#include <opscope/run_info.h>
#include <opscope/tool.h>

#include <mlu/mlurt.h>
#include <mlu/op_args.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace opscope_test {

// relu(x) -> y on n float32 elements of device memory, on a queue of its own, as call number seq.
class MadeUpRelu {
 public:
  MadeUpRelu(const std::vector<float>& x, std::uint64_t seq) : n_(x.size()) {
    EXPECT_EQ(mlurtQueueCreate(&queue_), MLURT_SUCCESS);
    EXPECT_EQ(mlurtMalloc(&x_, bytes()), MLURT_SUCCESS);
    EXPECT_EQ(mlurtMalloc(&y_, bytes()), MLURT_SUCCESS);
    EXPECT_EQ(mlurtMemcpy(x_, x.data(), bytes(), MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
    setOutput(std::vector<float>(n_, 0.0f));
    args_.x = view(x_);
    args_.y = view(y_);
    call_.op = mlu::OpId::relu;
    call_.name = "relu";
    call_.symbol = "mluopRelu";
    call_.seq = seq;
    call_.queue = queue_;
    call_.args = &args_;
    call_.args_ok = true;
  }
  ~MadeUpRelu() {
    mlurtFree(x_);
    mlurtFree(y_);
    mlurtQueueDestroy(queue_);
  }
  MadeUpRelu(const MadeUpRelu&) = delete;
  MadeUpRelu& operator=(const MadeUpRelu&) = delete;

  opscope::OpCall& call() { return call_; }
  // What "the device computed": written into y between before() and after().
  void setOutput(const std::vector<float>& y) {
    ASSERT_EQ(y.size(), n_);
    ASSERT_EQ(mlurtMemcpy(y_, y.data(), bytes(), MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
  }
  // What y holds now (the queue synchronized first).
  std::vector<float> output() {
    std::vector<float> y(n_);
    EXPECT_EQ(mlurtQueueSync(queue_), MLURT_SUCCESS);
    EXPECT_EQ(mlurtMemcpy(y.data(), y_, bytes(), MLURT_MEMCPY_DEVICE_TO_HOST), MLURT_SUCCESS);
    return y;
  }

 private:
  std::size_t bytes() const { return n_ * sizeof(float); }
  mlu::TensorView view(void* data) const {
    mlu::TensorView v;
    v.dtype = MLUOP_DTYPE_FLOAT;
    v.ndim = 1;
    v.dims[0] = static_cast<std::int64_t>(n_);
    v.strides[0] = 1;
    v.data = data;
    v.present = true;
    return v;
  }

  std::size_t n_;
  mlurtQueue_t queue_ = nullptr;
  void* x_ = nullptr;
  void* y_ = nullptr;
  mlu::relu_args args_;
  opscope::OpCall call_;
};

// Runs one made-up call through a tool as the hook would: before, "the device" writes y, after.
inline void runThrough(opscope::Tool& tool, MadeUpRelu& op, const std::vector<float>& y) {
  ASSERT_TRUE(tool.wants(op.call()));
  tool.before(op.call());
  op.setOutput(y);
  op.call().status = MLUOP_STATUS_SUCCESS;
  tool.after(op.call());
}

// A run whose results go to dir (pid 42).
inline opscope::RunInfo madeUpRun(const std::string& dir) {
  opscope::RunInfo run;
  run.pid = 42;
  run.result_dir = dir;
  return run;
}

}  // namespace opscope_test
