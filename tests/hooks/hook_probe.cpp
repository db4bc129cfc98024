// hook_probe — a small program linked to the MLU libraries, run under LD_PRELOAD=libopscope.so by the hook
// tests. It prints "main ran" first (so a test can tell the hook stopped the program before main), then:
//   hook_probe            nothing more
//   hook_probe ops        a fill (then the odd elements set to 100 + i by copies), an add on a
//                         non-contiguous view (every other element of a 2x8 buffer),
//                         and a failing add (mismatched shapes); prints the library's last error message and
//                         the runtime's last error after each, and the add's result
//   hook_probe crash      runs one add, then raises SIGSEGV
//   hook_probe fork       runs the ops, then forks a child that tries a fill, which the runtime refuses in a
//                         forked child, and exits (0 when refused with that reason); prints the child's exit
//                         status
//   hook_probe framework  declares a framework's frames (opscope.h) around four fills: in module "net" and
//                         op "aten::fill_" (graph node 42, line "probe.py:7 in step"); node 42's backward on
//                         another thread, inside the engine's unnamed frame, and the engine's own fill after
//                         it; then a fill after an op frame whose module was left open inside it
//   hook_probe shared_queue THREADS ITERS
//                         THREADS threads, each with a handle of its own on the device's default queue (one
//                         queue for all), add 1 in place to one 16-element tensor ITERS times each; prints
//                         the final value of every element (THREADS * ITERS when every add saw the last one's
//                         sum)
//   hook_probe mask       a causal mask as attention code makes one (a fill with -inf, added to scores: -inf
//   from
//                         an -inf input), then a real overflow: fill 3e38, add it to twice itself (inf in
//                         float32 from finite inputs: op #5)
//   hook_probe regions    capture regions (opscope.h's opscope_region_begin/end): fills 1 and 2 (on another
//                         thread) in a region of every thread; 3 (main) and 4 (another thread) in a region of
//                         the main thread only, labelled "mine"; a fill and an add in a region listing "add"
//                         only; fill 6 after every region; prints what the hook says to an unknown tool, a
//                         bad list and a bad option
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include "opscope.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

namespace {

void report(const char* what, mluopStatus_t status) {
  std::printf("%s: status %d message '%s' runtime last error %d\n", what, static_cast<int>(status),
              status == MLUOP_STATUS_SUCCESS ? "" : mluopGetLastErrorMessage(),
              static_cast<int>(mlurtPeekAtLastError()));
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("main ran\n");
  std::fflush(stdout);
  if (argc < 2) return 0;
  const bool crash = std::strcmp(argv[1], "crash") == 0;
  mluopHandle_t handle = nullptr;
  mluopCreate(&handle);
  float* buf = nullptr;
  float* out = nullptr;
  mlurtMalloc(reinterpret_cast<void**>(&buf), 16 * sizeof(float));
  mlurtMalloc(reinterpret_cast<void**>(&out), 8 * sizeof(float));
  mluopTensorDescriptor_t full = nullptr, view = nullptr, dense = nullptr, wrong = nullptr;
  mluopCreateTensorDescriptor(&full);
  mluopCreateTensorDescriptor(&view);
  mluopCreateTensorDescriptor(&dense);
  mluopCreateTensorDescriptor(&wrong);
  const std::int64_t full_dims[2] = {2, 8}, view_dims[2] = {2, 4}, view_strides[2] = {8, 2},
                     wrong_dims[1] = {3};
  mluopSetTensorDescriptor(full, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, full_dims);
  mluopSetTensorDescriptorEx(view, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, view_dims, view_strides);
  mluopSetTensorDescriptor(dense, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, view_dims);
  mluopSetTensorDescriptor(wrong, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, wrong_dims);

  auto release = [&] {
    mlurtFree(buf);
    mlurtFree(out);
    mluopDestroyTensorDescriptor(full);
    mluopDestroyTensorDescriptor(view);
    mluopDestroyTensorDescriptor(dense);
    mluopDestroyTensorDescriptor(wrong);
    mluopDestroy(handle);
  };
  if (std::strcmp(argv[1], "shared_queue") == 0 && argc >= 4) {
    const int threads = std::atoi(argv[2]), iters = std::atoi(argv[3]);
    float* ones = nullptr;
    mlurtMalloc(reinterpret_cast<void**>(&ones), 16 * sizeof(float));
    mluopFill(handle, 0.0, full, buf);
    mluopFill(handle, 1.0, full, ones);
    mlurtDeviceSynchronize();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        mluopHandle_t own = nullptr;
        mluopCreate(&own);  // the device's default queue, as every other thread's
        for (int i = 0; i < iters; ++i) mluopAdd(own, 1.0f, full, buf, full, ones, full, buf);
        mluopDestroy(own);
      });
    }
    for (auto& w : workers) w.join();
    std::vector<float> values(16);
    mlurtDeviceSynchronize();
    mlurtMemcpy(values.data(), buf, sizeof(float) * 16, MLURT_MEMCPY_DEVICE_TO_HOST);
    std::printf("values %g %g\n", values.front(), values.back());
    mlurtFree(ones);
    release();
    return 0;
  }
  if (std::strcmp(argv[1], "mask") == 0) {
    float* scores = nullptr;
    mlurtMalloc(reinterpret_cast<void**>(&scores), 16 * sizeof(float));
    mluopFill(handle, -INFINITY, full, buf);                           // #1: the mask, asked for
    mluopFill(handle, 1.0, full, scores);                              // #2
    mluopAdd(handle, 1.0f, full, scores, full, buf, full, buf);        // #3: -inf from the mask
    mluopFill(handle, 3e38, full, scores);                             // #4
    mluopAdd(handle, 2.0f, full, scores, full, scores, full, scores);  // #5: 3e38 + 6e38 = inf
    mlurtDeviceSynchronize();
    mlurtFree(scores);
    release();
    return 0;
  }
  if (std::strcmp(argv[1], "regions") == 0) {
    auto on_thread = [&](double value) {
      std::thread t([&] {
        mluopHandle_t own = nullptr;
        mluopCreate(&own);
        mluopFill(own, value, full, buf);
        mluopDestroy(own);
      });
      t.join();
    };
    char error[256] = "";
    const int all = opscope_region_begin("capture", nullptr, nullptr, nullptr, 0, error, sizeof error);
    mluopFill(handle, 1.0, full, buf);
    on_thread(2.0);
    opscope_region_end(all);
    const int mine = opscope_region_begin("capture", "mine", nullptr, nullptr, 1, error, sizeof error);
    mluopFill(handle, 3.0, full, buf);
    on_thread(4.0);
    opscope_region_end(mine);
    const int listed = opscope_region_begin("capture", nullptr, "add", nullptr, 0, error, sizeof error);
    mluopFill(handle, 5.0, full, buf);
    mluopAdd(handle, 2.0f, view, buf, view, buf, dense, out);
    opscope_region_end(listed);
    mluopFill(handle, 6.0, full, buf);
    std::printf("regions %d %d %d\n", all, mine, listed);
    for (const auto& [tool, list, options] :
         {std::tuple<const char*, const char*, const char*>{"coverage", nullptr, nullptr},
          {"compare", "add,conv2d(", nullptr},
          {"capture", nullptr, "OP_CAPTURE_MODE=statistics"}}) {
      const int id = opscope_region_begin(tool, nullptr, list, options, 0, error, sizeof error);
      std::printf("%s: %d %s\n", tool, id, error);
    }
    mlurtDeviceSynchronize();
    release();
    return 0;
  }
  if (std::strcmp(argv[1], "framework") == 0) {
    opscope_framework_module_push("net");
    opscope_framework_op_begin("aten::fill_", 42, "probe.py:7 in step");
    report("fill in net", mluopFill(handle, 1.0, full, buf));
    opscope_framework_op_pop();
    opscope_framework_module_pop();
    std::thread backward([&] {
      mluopHandle_t own = nullptr;
      mluopCreate(&own);
      opscope_framework_backward_begin(nullptr, -1);  // the engine's frame around the node
      opscope_framework_backward_begin("FillBackward0", 42);
      report("fill in the backward", mluopFill(own, 2.0, full, buf));
      opscope_framework_op_pop();
      report("fill of the engine", mluopFill(own, 3.0, full, buf));
      opscope_framework_op_pop();
      mluopDestroy(own);
    });
    backward.join();
    opscope_framework_op_begin("aten::outer", -1, "probe.py:9 in step");
    opscope_framework_module_push("left.open");
    opscope_framework_op_pop();  // closes the module left open inside it
    report("fill outside", mluopFill(handle, 4.0, full, buf));
    mlurtDeviceSynchronize();
    release();
    return 0;
  }
  report("fill", mluopFill(handle, 1.5, full, buf));
  {
    // The elements the strided view skips get values of their own, so an add that ignores the view's
    // strides (MLU_SIM_FAULT=add:noncontig) computes something else.
    std::vector<float> values(16);
    mlurtDeviceSynchronize();
    mlurtMemcpy(values.data(), buf, sizeof(float) * 16, MLURT_MEMCPY_DEVICE_TO_HOST);
    for (int i = 1; i < 16; i += 2) values[static_cast<std::size_t>(i)] = 100.0f + static_cast<float>(i);
    mlurtMemcpy(buf, values.data(), sizeof(float) * 16, MLURT_MEMCPY_HOST_TO_DEVICE);
  }
  report("add", mluopAdd(handle, 2.0f, view, buf, view, buf, dense, out));
  if (crash) {
    mlurtDeviceSynchronize();
    std::fflush(stdout);
    std::raise(SIGSEGV);
  }
  report("bad add", mluopAdd(handle, 1.0f, view, buf, wrong, buf, dense, out));
  if (std::strcmp(argv[1], "fork") == 0) {
    mlurtDeviceSynchronize();
    std::fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
      // The runtime cannot work in a forked child (its workers are the parent's): the calls are refused with
      // the reason, and the child exits without waiting for anything.
      mluopHandle_t child_handle = nullptr;
      const bool refused = (mluopCreate(&child_handle) != MLUOP_STATUS_SUCCESS ||
                            mluopFill(child_handle, 2.0, full, buf) != MLUOP_STATUS_SUCCESS) &&
                           std::strstr(mlurtGetLastErrorMessage(), "forked child") != nullptr;
      std::exit(refused ? 0 : 3);
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  mlurtDeviceSynchronize();
  std::vector<float> host(8);
  mlurtMemcpy(host.data(), out, 8 * sizeof(float), MLURT_MEMCPY_DEVICE_TO_HOST);
  std::printf("result %g %g\n", host[0], host[7]);
  release();
  return 0;
}
