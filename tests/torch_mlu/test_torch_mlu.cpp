// The PyTorch front end as its users run it: real PyTorch programs (/usr/bin/python3) on the simulated
// MLU, alone and under `opscope run`. The device's numbers are checked against PyTorch's own CPU kernels
// (ops_check.py: float64 references; the MNIST example step by step against the same script on the CPU),
// the CPU fallback is checked to list what it ran, and the hook's tools to see the PyTorch ops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "demo_runs.h"
#include "subprocess.h"
#include "test_paths.h"
#include "torch_paths.h"
#include "trace_consumers.h"

namespace {

using opscope_test::Env;
using RunResult = opscope_test::Run;
using ::testing::HasSubstr;
using ::testing::Not;

namespace fs = std::filesystem;

const std::string kSource = opscope_test::paths::kSourceDir;
const std::string kMnist = kSource + "/examples/torch_mnist/main.py";
const std::string kLlama = kSource + "/examples/torch_llama/main.py";
const std::string kGpt = kSource + "/examples/torch_gpt/main.py";
const std::string kResnet = kSource + "/examples/torch_resnet/main.py";

// The GPT example small enough for a test: 2 layers of width 64 on 32 characters, evaluated and sampled.
std::vector<std::string> gptArgs(int steps) {
  return {kGpt,
          "--steps",
          std::to_string(steps),
          "--n-layer",
          "2",
          "--n-embd",
          "64",
          "--block-size",
          "32",
          "--batch-size",
          "4",
          "--eval-iters",
          "1",
          "--sample-tokens",
          "8",
          "--print-losses"};
}
// The ResNet-18 example at batch 4 on 64x64 images, trained and evaluated.
std::vector<std::string> resnetArgs(int steps) {
  return {kResnet,          "--steps", std::to_string(steps), "--batch-size", "4",
          "--eval-batches", "1",       "--print-losses"};
}

Env pythonEnv(Env extra = {}) {
  extra.emplace_back("PYTHONPATH",
                     std::string(torch_test::kPythonPath) + ":" + kSource + "/examples/torch_mnist");
  return extra;
}

RunResult python(const std::vector<std::string>& args, const Env& env = {}) {
  std::vector<std::string> argv = {torch_test::kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  return opscope_test::run(argv, pythonEnv(env));
}

using opscope_test::losses;  // main.py --print-losses's "step N loss X" lines

std::vector<std::string> mnistArgs(int steps, bool mlu) {
  std::vector<std::string> a = {
      kMnist, "--max-steps", std::to_string(steps), "--print-losses", "--no-eval", "--train-size", "1000"};
  if (!mlu) a.push_back("--no-mlu");
  return a;
}

fs::path freshDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("opscope-torch-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir;
}

// `opscope run TOOL --out dir -- /usr/bin/python3 ARGS...` (tool "": none), the package on PYTHONPATH.
RunResult underOpscope(const std::string& tool, const fs::path& dir, const std::vector<std::string>& args,
                       const Env& env = {}) {
  std::vector<std::string> argv = {opscope_test::paths::kOpscope, "run"};
  if (!tool.empty()) argv.push_back(tool);  // "": a plain opscope run
  argv.insert(argv.end(), {"--out", dir.string(), "--", torch_test::kPython});
  argv.insert(argv.end(), args.begin(), args.end());
  return opscope_test::run(argv, pythonEnv(env));
}

// The one result directory a run left in dir ("" when there is not exactly one).
fs::path onlyRun(const fs::path& dir) {
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(dir)) runs.push_back(e.path());
  return runs.size() == 1 ? runs[0] : fs::path();
}

TEST(TorchMlu, NativeOpsMatchFloat64CpuReferences) {
  const RunResult r = python({kSource + "/tests/torch_mlu/ops_check.py"}, {{"MLU_SIM_DEVICE_COUNT", "2"}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(", 0 failed")) << r.out;
  // Every op of the check runs natively: nothing fell back to the CPU.
  EXPECT_THAT(r.out, HasSubstr("fallback: {}")) << r.out;
  EXPECT_THAT(r.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << r.err;
}

// Each training step of the MNIST example on the device against the same step on PyTorch's CPU, from the
// same parameters, batch and dropout masks (lockstep.py): loss, gradients and updated parameters.
TEST(TorchMlu, MnistExampleStepsMatchTheCpuInLockstep) {
  const RunResult r = python({kSource + "/tests/torch_mlu/lockstep.py", "20", "64"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("lockstep: 20 steps of batch 64")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("fallback: {}")) << r.out;
}

// The example as its users run it, free-running on each backend: the same losses while float32 rounding
// has not been amplified yet (the training parts the two trajectories after ~8 steps, as it parts PyTorch's
// CPU on one thread from two: docs/torch_mlu.md), and it learns.
TEST(TorchMlu, MnistExampleLearnsAndStartsWithTheLossesOfTheCpu) {
  constexpr int kSteps = 20;
  const RunResult mlu = python(mnistArgs(kSteps, true));
  const RunResult cpu = python(mnistArgs(kSteps, false));
  ASSERT_EQ(mlu.exit_code, 0) << mlu.out << mlu.err;
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out << cpu.err;
  const std::vector<double> a = losses(mlu.out), b = losses(cpu.out);
  ASSERT_EQ(a.size(), static_cast<std::size_t>(kSteps)) << mlu.out;
  ASSERT_EQ(b.size(), a.size()) << cpu.out;
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * b[i]) << "step " << i + 1;
  EXPECT_NEAR(a.front(), 2.30, 0.15) << "an untrained 10-class model starts near ln(10)";
  EXPECT_LT((a[kSteps - 1] + a[kSteps - 2]) / 2, a.front() - 0.3) << mlu.out;
  EXPECT_THAT(mlu.out, HasSubstr("on privateuseone:0"));
  EXPECT_THAT(mlu.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << mlu.err;
}

// The Llama-style example (AdamW does not amplify rounding as the MNIST example's Adadelta at lr 1 does):
// 20 free-running steps with grouped-query attention give the CPU's losses, and it learns.
TEST(TorchMlu, LlamaExampleGivesTheLossesOfTheCpu) {
  const std::vector<std::string> args = {kLlama, "--steps", "20", "--kv-heads", "2", "--print-losses"};
  std::vector<std::string> cpu_args = args;
  cpu_args.push_back("--no-mlu");
  const RunResult mlu = python(args);
  const RunResult cpu = python(cpu_args);
  ASSERT_EQ(mlu.exit_code, 0) << mlu.out << mlu.err;
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out << cpu.err;
  const std::vector<double> a = losses(mlu.out), b = losses(cpu.out);
  ASSERT_EQ(a.size(), 20u) << mlu.out;
  ASSERT_EQ(b.size(), a.size()) << cpu.out;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * b[i]) << "step " << i + 1;
  EXPECT_LT(a.back(), a.front() - 1.0) << mlu.out;
  EXPECT_THAT(mlu.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << mlu.err;
}

// torchvision's ResNet-18, ResNet-50, MobileNetV2, MobileNetV3-small and VGG-11-BN on 64x64 images: a
// training step and an evaluation, every op on the device, against float64 beside PyTorch's own float32
// (models_check.py).
TEST(TorchMlu, TorchvisionModelsRunNativelyAndMatchFloat64AsWellAsTheCpu) {
  const RunResult r = python({kSource + "/tests/torch_mlu/models_check.py"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* arch :
       {"resnet18: ok", "resnet50: ok", "mobilenet_v2: ok", "mobilenet_v3_small: ok", "vgg11_bn: ok"}) {
    EXPECT_THAT(r.out, HasSubstr(arch)) << r.out;
  }
  EXPECT_THAT(r.out, HasSubstr("fallback: {}")) << r.out;
  EXPECT_THAT(r.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << r.err;
}

// The GPT and ResNet examples step by step against the CPU from the CPU's state (lockstep_models.py),
// then evaluated, and GPT's top-k sampling picking the CPU's characters.
TEST(TorchMlu, GptAndResnetExamplesMatchTheCpuInLockstep) {
  const RunResult r = python({kSource + "/tests/torch_mlu/lockstep_models.py", "all", "4"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("lockstep gpt: 4 steps")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("lockstep resnet18: 4 steps")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("samples equal: True")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("fallback: {}")) << r.out;
}

// Both examples as users run them, training, evaluation and sampling under auto-compare and under memcheck:
// nothing fails, nothing leaks, nothing falls back; a fault planted in batch_norm_forward (ResNet) and one
// in layer_norm_backward (GPT) are each the first failing op, named with the PyTorch op above it.
TEST(TorchMlu, GptAndResnetExamplesAreCleanUnderCompareAndMemcheckAndAPlantedFaultIsNamed) {
  for (const auto& program : {gptArgs(2), resnetArgs(2)}) {
    const fs::path dir = freshDir("examples");
    const RunResult compare = underOpscope("--compare", dir / "compare", program);
    ASSERT_EQ(compare.exit_code, 0) << compare.out << compare.err;
    EXPECT_THAT(compare.err, HasSubstr(" 0 failed")) << compare.err;
    EXPECT_THAT(compare.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << compare.err;
    EXPECT_THAT(compare.out, HasSubstr("eval: ")) << compare.out;
    const RunResult memcheck = underOpscope("--memcheck", dir / "memcheck", program);
    ASSERT_EQ(memcheck.exit_code, 0) << memcheck.out << memcheck.err;
    EXPECT_THAT(memcheck.err,
                HasSubstr("opscope memcheck: 0 bytes leaked in 0 allocations from 0 sites; 0 memory errors"))
        << memcheck.err;
    fs::remove_all(dir);
  }
  struct Planted {
    std::vector<std::string> program;
    std::string fault, first, framework_op;
  };
  for (const Planted& p : {Planted{resnetArgs(1), "batch_norm_forward:scale=1.01@0.05",
                                   "first failing op: batch_norm_forward #", "aten::batch_norm"},
                           Planted{gptArgs(1), "layer_norm_backward:scale=1.01@0.05",
                                   "first failing op: layer_norm_backward #", "NativeLayerNormBackward0"}}) {
    const fs::path dir = freshDir("planted");
    const RunResult r = underOpscope("--compare", dir, p.program, {{"MLU_SIM_FAULT", p.fault}});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(p.first)) << r.err;
    EXPECT_THAT(r.err, HasSubstr(p.framework_op)) << r.err;
    fs::remove_all(dir);
  }
}

TEST(TorchMlu, AnOpWithoutAKernelFallsBackToTheCpuAndIsListed) {
  const RunResult r = python({"-c",
                              "import torch, torch_mlu\n"
                              "x = torch.arange(6.0).to(torch.mlu.device)\n"
                              "y = torch.cumprod(x + 1, 0)\n"
                              "assert y.is_mlu, y.device\n"
                              "print(y.cpu().tolist())\n"
                              // a boolean mask that selects: its indices (a Tensor?[] argument) are device
                              // tensors, which the fallback moves to the CPU too
                              "m = x[x > 2]\n"
                              "assert m.is_mlu, m.device\n"
                              "print(m.cpu().tolist())\n"
                              "print(torch.mlu.fallback_ops())\n"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[1.0, 2.0, 6.0, 24.0, 120.0, 720.0]"));
  EXPECT_THAT(r.out, HasSubstr("[3.0, 4.0, 5.0]"));
  EXPECT_THAT(r.out, HasSubstr("'aten::cumprod.out': 1, 'aten::index.Tensor': 1")) << r.out;
  EXPECT_THAT(r.err, HasSubstr("torch_mlu: 2 ops fell back to the CPU (2 calls): aten::cumprod.out x1 "
                               "aten::index.Tensor x1"))
      << r.err;

  // Under opscope the list reaches run.json and the summary (and the report, tests/viewer); a program that
  // never uses the device prints no list.
  const fs::path dir = freshDir("fallback");
  const RunResult under = underOpscope("--profile", dir,
                                       {"-c",
                                        "import torch, torch_mlu\n"
                                        "x = torch.arange(6.0).to(torch.mlu.device)\n"
                                        "print(torch.cumprod(torch.cumprod(x + 1, 0), 0).cpu().tolist())\n"});
  ASSERT_EQ(under.exit_code, 0) << under.out << under.err;
  const fs::path run = onlyRun(dir);
  ASSERT_FALSE(run.empty());
  const RunResult summary = opscope_test::run({opscope_test::paths::kOpscope, "summary", run.string()});
  EXPECT_THAT(summary.out,
              HasSubstr("Framework ops on the CPU (the framework's own fallback): 1 ops, 2 calls\n"
                        "  aten::cumprod.out                         2 calls"))
      << summary.out;
  fs::remove_all(dir);
  const RunResult unused = python({"-c", "import torch, torch_mlu\nprint(torch.ones(2).sum().item())\n"});
  ASSERT_EQ(unused.exit_code, 0) << unused.err;
  EXPECT_THAT(unused.err, Not(HasSubstr("torch_mlu:"))) << unused.err;
}

// Also x @ x of a 512x512 and a 1024x1024 randn in float32, whose elements near 0 cancel: the dtype's
// tolerance failed them (4e-5 to 9e-5 off); a reduction's verdict allows a share of the output's RMS.
TEST(TorchMlu, BothExamplesAndALargeMatmulAreCleanUnderAutoCompare) {
  const std::vector<std::string> mnist = mnistArgs(3, true);
  const std::vector<std::string> llama = {kLlama, "--steps", "3", "--kv-heads", "2"};
  const std::vector<std::string> matmul = {
      "-c",
      "import torch, torch_mlu\ntorch.manual_seed(0)\nfor n in (512, 1024):\n"
      "    x = torch.randn(n, n).to(torch.mlu.device)\n    print((x @ x).sum().item())\n"};
  for (const auto* program : {&mnist, &llama, &matmul}) {
    const fs::path dir = freshDir("compare");
    const RunResult r = underOpscope("--compare", dir, *program);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(" 0 failed")) << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("first failing op"))) << r.err;
    EXPECT_THAT(r.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << r.err;
    fs::remove_all(dir);
  }
}

// memcheck on a PyTorch program: what the program still holds when it ends (torch_mlu ends the run from
// Python's atexit, before the interpreter's teardown frees it) is a leak, with where it was allocated; a
// clean training leaves nothing.
// memcheck on a script as people write one: torchvision's ResNet-18, its optimizer and batch in module
// globals, trained with steps marked by the optimizer. What the program holds at its end is "still held at
// exit", not a leak: at least the parameters, their gradients and the momentum buffers. Keeping each step's
// outputs with their graphs is a leak, named at the line that makes them, growing by what
// torch.mlu.memory_allocated() says that line keeps per step. Every backtrace starts with Python frames.
TEST(TorchMlu, MemcheckHoldsAModelInGlobalsAndNamesAGrowingListAtItsLine) {
  const fs::path dir = freshDir("memcheck");
  fs::create_directories(dir);
  const fs::path script = dir / "leaks.py";
  std::ofstream(script)
      << "import sys\n"
         "import torch, torch_mlu, torchvision\n"
         "torch.manual_seed(0)\n"
         "model = torchvision.models.resnet18(num_classes=10).to(torch.mlu.device)\n"
         "optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)\n"
         "x = torch.randn(2, 3, 32, 32).to(torch.mlu.device)\n"
         "y = torch.randint(10, (2,)).to(torch.mlu.device)\n"
         "kept, growth = [], []\n"
         "for step in range(6):\n"
         "    loss = torch.nn.functional.cross_entropy(model(x), y)\n"
         "    optimizer.zero_grad()\n"
         "    loss.backward()\n"
         "    optimizer.step()\n"
         "    if 'keep' in sys.argv:\n"
         "        before = torch.mlu.memory_allocated()\n"
         "        kept.append(model(x))  # line 16: each step's outputs, with their graphs\n"
         "        growth.append(torch.mlu.memory_allocated() - before)\n"
         "print('param_bytes', sum(p.numel() * 4 for p in model.parameters()))\n"
         "print('growth', growth[-1] if growth else 0)\n";
  auto number = [](const std::string& text, const std::string& key) -> long long {
    std::smatch m;
    return std::regex_search(text, m, std::regex(key + " ([0-9]+)")) ? std::stoll(m[1]) : -1;
  };
  const RunResult clean = underOpscope("--memcheck", dir / "clean", {script.string()});
  ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_THAT(clean.err,
              HasSubstr("opscope memcheck: 0 bytes leaked in 0 allocations from 0 sites; 0 memory errors"))
      << clean.err;
  const long long param_bytes = number(clean.out, "param_bytes");
  EXPECT_EQ(param_bytes, 11181642 * 4) << clean.out;
  const long long held = number(clean.err, "still held at exit \\(not leaks\\):");
  EXPECT_GE(held, 3 * param_bytes) << clean.err;  // parameters, gradients, momentum
  EXPECT_LT(held, 4 * param_bytes) << clean.err;
  // The tensors' peak is in the backward, with the model's memory by module: the parameters (and batch
  // norm's buffers) made at line 4 outside every module, the momentum buffers in the optimizer's step, one
  // float per parameter.
  std::smatch peak;
  ASSERT_TRUE(
      std::regex_search(clean.err, peak,
                        std::regex("tensor peak on MLU 0: [0-9]+ bytes after op #[0-9]+ \\([a-z0-9_]+\\) "
                                   "in [^\n]*\\(backward of [^\n]*; held most by ([^\n]*)\n")))
      << clean.err;
  const std::string holders = peak[1];
  EXPECT_THAT(holders, HasSubstr("Optimizer.step#SGD.step " + std::to_string(param_bytes) + " bytes"))
      << holders;
  const long long at_line_4 = number(holders, "\\(no module\\) at " + script.string() + ":4 in <module>");
  EXPECT_GE(at_line_4, param_bytes) << holders;
  EXPECT_LT(at_line_4, param_bytes + param_bytes / 100) << holders;
  const fs::path clean_run = onlyRun(dir / "clean");
  ASSERT_FALSE(clean_run.empty());
  std::ifstream report(clean_run / "memcheck.txt");
  const std::string text((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("Still held at exit: " + std::to_string(held) + " bytes")) << text;
  // Each site's stack starts with the program's frames: "#0 in <function> <file>:<line>", no address.
  std::size_t blocks = 0;
  for (std::size_t at = text.find(" from:\n"); at != std::string::npos; at = text.find(" from:\n", at + 1)) {
    ++blocks;
    EXPECT_EQ(text.compare(at + 7, 10, "    #0 in "), 0) << text.substr(at, 200);
  }
  EXPECT_GT(blocks, 10u);

  const RunResult leaky = underOpscope("--memcheck", dir / "leaky", {script.string(), "keep"});
  ASSERT_EQ(leaky.exit_code, 0) << leaky.out << leaky.err;
  const long long growth = number(leaky.out, "growth");
  ASSERT_GT(growth, 100000) << leaky.out;
  // Every leak is made at line 16, and together they grow as that line holds more each step (memcheck counts
  // the bytes asked for, the caching allocator's pieces are rounded up to 512 bytes): memcheck.json has them
  // all (stderr the first ten).
  const fs::path leaky_run = onlyRun(dir / "leaky");
  ASSERT_FALSE(leaky_run.empty());
  const RunResult json = opscope_test::run(
      {torch_test::kPython, "-c",
       "import json, sys\n"
       "m = json.load(open(sys.argv[1]))\n"
       "print('leaks', len(m['leaks']), 'per_step', sum(l['bytes_per_step'] for l in m['leaks']))\n"
       "print('sources', sorted(set(l['source'] for l in m['leaks'])))\n"
       "print('steps', sorted(set(l['steps'] for l in m['leaks'])))\n",
       (leaky_run / "memcheck.json").string()});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const long long leaks = number(json.out, "leaks"), per_step = number(json.out, "per_step");
  EXPECT_GT(leaks, 10) << json.out;
  EXPECT_THAT(json.out, HasSubstr("sources ['" + script.string() + ":16 in <module>']\nsteps [4]\n"))
      << json.out;
  EXPECT_GT(per_step, growth * 9 / 10) << json.out;
  EXPECT_LE(per_step, growth) << json.out;
  EXPECT_THAT(leaky.err,
              ::testing::ContainsRegex("opscope memcheck: leak: [0-9]+ bytes a step \\([0-9]+ bytes in 6 "
                                       "allocations\\) made in [a-z0-9.]+ at " +
                                       script.string() + ":16 in <module>\n"))
      << leaky.err;
  // The list holds the outputs of all 6 steps: the leak is 6 steps' worth (each site's bytes per step are
  // rounded down).
  const long long leaked = number(leaky.err, "opscope memcheck:");
  EXPECT_GE(leaked, 6 * per_step) << leaky.err;
  EXPECT_LT(leaked, 6 * (per_step + leaks)) << leaky.err;
  fs::remove_all(dir);
}

// The caching allocator: a 4000-byte tensor takes a 4096-byte piece of a 2 MiB segment; its memory is
// handed out again to the next tensor that fits; freed neighbours merge (freed pieces of 3 and 4 KiB hold a
// 7 KiB tensor at the first one's address); a 3 MiB tensor gets a 20 MiB segment of its own; empty_cache
// gives back every segment no tensor uses. With PYTORCH_NO_MLU_MEMORY_CACHING=1 nothing is cached. Out of
// device memory, the cache is given back and the allocation tried again.
TEST(TorchMlu, TheCachingAllocatorReusesMergesAndEmpties) {
  const std::string script =
      "import os, torch, torch_mlu\n"
      "m = torch.mlu\n"
      "def empty(n):\n"
      "    return torch.empty(n, dtype=torch.uint8, device=m.device)\n"
      "if os.environ.get('PYTORCH_NO_MLU_MEMORY_CACHING') == '1':\n"
      "    x = empty(4000); del x\n"
      "    assert m.memory_reserved() == 0 and m.memory_allocated() == 0\n"
      "    print('uncached ok'); raise SystemExit\n"
      "assert m.memory_allocated() == 0 and m.memory_reserved() == 0\n"
      "x = empty(4000)\n"
      "assert m.memory_allocated() == 4096, m.memory_allocated()\n"
      "assert m.memory_reserved() == 2 << 20, m.memory_reserved()\n"
      "p = x.data_ptr(); del x\n"
      "assert m.memory_allocated() == 0 and m.memory_reserved() == 2 << 20\n"
      "y = empty(3000); assert y.data_ptr() == p, (hex(y.data_ptr()), hex(p))\n"
      "z = empty(4096); keep = empty(512)\n"
      "assert z.data_ptr() == p + 3072, hex(z.data_ptr() - p)\n"
      "del y, z\n"
      "w = empty(7168); assert w.data_ptr() == p, hex(w.data_ptr() - p)\n"
      "big = empty(3 << 20)\n"
      "assert m.memory_reserved() == 22 << 20, m.memory_reserved()\n"
      "assert m.max_memory_allocated() >= (3 << 20) + 7168 + 512\n"
      "del big; m.empty_cache()\n"
      "assert m.memory_reserved() == 2 << 20, m.memory_reserved()\n"
      "del w, keep; m.empty_cache()\n"
      "assert m.memory_reserved() == 0 and m.memory_allocated() == 0\n"
      "print('cached ok')\n";
  const RunResult cached = python({"-c", script});
  ASSERT_EQ(cached.exit_code, 0) << cached.out << cached.err;
  EXPECT_THAT(cached.out, HasSubstr("cached ok"));
  const RunResult uncached = python({"-c", script}, {{"PYTORCH_NO_MLU_MEMORY_CACHING", "1"}});
  ASSERT_EQ(uncached.exit_code, 0) << uncached.out << uncached.err;
  EXPECT_THAT(uncached.out, HasSubstr("uncached ok"));

  // On a 64 MiB device: 48 MiB cached after four 12 MiB tensors are freed, then a 40 MiB tensor fits only
  // once the cache is given back (done without being asked); a second one does not fit at all, a clear
  // error that says how much was allocated.
  const RunResult small = python({"-c",
                                  "import torch, torch_mlu\n"
                                  "m = torch.mlu\n"
                                  "def empty(n):\n"
                                  "    return torch.empty(n, dtype=torch.uint8, device=m.device)\n"
                                  "a = [empty(12 << 20) for _ in range(4)]\n"
                                  "del a\n"
                                  "assert m.memory_reserved() == 48 << 20, m.memory_reserved()\n"
                                  "b = empty(40 << 20)\n"
                                  "assert m.memory_reserved() == 40 << 20, m.memory_reserved()\n"
                                  "try:\n"
                                  "    c = empty(40 << 20)\n"
                                  "except RuntimeError as e:\n"
                                  "    print(str(e).splitlines()[0])\n"},
                                 {{"MLU_SIM_MEMORY_MB", "64"}});
  ASSERT_EQ(small.exit_code, 0) << small.out << small.err;
  EXPECT_THAT(small.out, HasSubstr("torch_mlu: out of memory on MLU 0: tried to allocate 41943040 bytes (a "
                                   "41943040-byte segment) with 41943040 bytes allocated and the cache "
                                   "emptied"))
      << small.out;
}

// Streams are MLU queues and events MLU notifiers (streams_check.py, with relu's kernel made to sleep 300 ms
// before it reads its input): a result computed across two streams joined by an event, event timing, the
// backward after a forward on another stream, all against PyTorch's CPU; record_stream keeps a freed
// tensor's memory from the default stream until the other stream is done — and without it the same
// program reads memory already filled by the next tensor, which is what the check would catch. Under the
// profiler the ops are on more than one queue of the device.
TEST(TorchMlu, StreamsAreQueuesAndRecordStreamKeepsMemoryUntilTheStreamIsDone) {
  const std::string script = kSource + "/tests/torch_mlu/streams_check.py";
  const Env delay = {{"MLU_SIM_FAULT", "relu:delay=300"}};
  const RunResult all = python({script, "all"}, delay);
  ASSERT_EQ(all.exit_code, 0) << all.out << all.err;
  EXPECT_THAT(all.out, HasSubstr("streams ok"));
  const RunResult race = python({script, "race"}, delay);
  ASSERT_EQ(race.exit_code, 0) << race.out << race.err;
  EXPECT_THAT(race.out, HasSubstr("without record_stream: relu right False, memory reused True"));

  const fs::path dir = freshDir("streams");
  const RunResult profiled = underOpscope("--profile", dir, {script, "all"}, delay);
  ASSERT_EQ(profiled.exit_code, 0) << profiled.out << profiled.err;
  const fs::path run = onlyRun(dir);
  ASSERT_FALSE(run.empty());
  std::ifstream csv(run / "time_measure.csv");
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line.rfind("name,seq,thread,device,queue,", 0), 0u) << line;
  std::set<std::string> queues;
  while (std::getline(csv, line)) {
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; i < 5 && std::getline(fields, field, ','); ++i) {
    }
    queues.insert(field);
  }
  EXPECT_GE(queues.size(), 3u) << "the default queue and two streams'";
  fs::remove_all(dir);

  // MEM_CHECK_RACE: the program without record_stream is a race of the next tensor's fill on the default
  // stream with the relu on the other stream that still reads the freed piece, named with both Python lines.
  // (The report does not depend on the timing: under memcheck the relu may be right by chance.) Streams used
  // right (events, wait_stream, record_stream: the script's "memcheck" mode, whose record_stream check
  // allows the reuse memcheck's syncs make legal) are no race.
  const fs::path raced = freshDir("streams_race");
  const RunResult r = underOpscope("--memcheck-race", raced, {script, "race"}, delay);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex("ERROR: race: fill #[0-9]+ \\(in [^\n]*streams_check\\.py:[0-9]+ "
                                       "in race\\) writes y on queue [0-9]+, and relu #[0-9]+ \\(in "
                                       "[^\n]*streams_check\\.py:[0-9]+ in race\\) reads x on queue"))
      << r.err;
  fs::remove_all(raced);
  const fs::path right = freshDir("streams_right");
  const RunResult clean = underOpscope("--memcheck-race", right, {script, "memcheck"}, delay);
  ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_THAT(clean.out, HasSubstr("streams ok"));
  EXPECT_THAT(clean.err, HasSubstr(" 0 memory errors")) << clean.err;
  fs::remove_all(right);
}

// An op writing past its output inside the caching allocator's segment: memcheck finds it per tensor (the
// allocator leaves memcheck's red zone after each piece and announces the piece), names the op and the
// PyTorch allocation; the training goes on.
TEST(TorchMlu, MemcheckFindsAnOverflowInsideTheCachingAllocatorsSegment) {
  const fs::path dir = freshDir("overflow");
  const RunResult r = underOpscope("--memcheck", dir, mnistArgs(2, true), {{"MLU_SIM_FAULT", "relu:oob=4"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, ::testing::ContainsRegex("heap-buffer-overflow on MLU 0: 4 bytes past the end of a "
                                              "[0-9]+-byte allocation, written by relu #[0-9]+ \\(in [^\n]*"
                                              "main\\.py:[0-9]+ in [^\n]*\\)\n"))
      << r.err;
  EXPECT_THAT(r.err, HasSubstr("MluAllocator::allocate")) << r.err;
  // Backtraces are on: the op's own is left out on purpose (its Python line is in the message), and said so.
  EXPECT_THAT(r.err, HasSubstr("(at the program's line named above; the op's own backtrace is not kept"));
  EXPECT_THAT(r.err, Not(HasSubstr("no backtrace: set MEM_CHECK_ENABLE_BACKTRACE")));
  EXPECT_THAT(r.err, HasSubstr("0 bytes leaked in 0 allocations from 0 sites")) << r.err;
  EXPECT_EQ(losses(r.out).size(), 2u) << r.out;
  fs::remove_all(dir);
}

// The line of `needle` in `file` after the first line holding `after` (0 when there is none): where a test
// expects a finding to point, read from the program itself.
int lineOf(const std::string& file, const std::string& after, const std::string& needle) {
  std::ifstream in(file);
  std::string line;
  bool past = false;
  for (int number = 1; std::getline(in, line); ++number) {
    past = past || line.find(after) != std::string::npos;
    if (past && line.find(needle) != std::string::npos) return number;
  }
  return 0;
}

// A fault planted in every backward convolution of torchvision's ResNet-18 is named as its user reads the
// model: the module (the last convolution of the forward is the first of the backward: layer4.1.conv2), the
// forward op, the line of the user's script that ran the forward, the PyTorch ops, and how to replay it; in
// the run's output, `opscope summary`, the report and capture.db.
TEST(TorchMlu, APlantedKernelFaultIsNamedWithItsModuleAndTheUsersLine) {
  const fs::path dir = freshDir("fault");
  const RunResult r =
      underOpscope("--compare", dir, resnetArgs(1), {{"MLU_SIM_FAULT", "conv2d_backward_filter:scale=1.01"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const int forward_line = lineOf(kResnet, "def main():", "out = model(");
  ASSERT_GT(forward_line, 0);
  const std::string site = "in layer4.1.conv2 (backward of aten::convolution) at " + kResnet + ":" +
                           std::to_string(forward_line) + " in main";
  const fs::path run = onlyRun(dir);
  ASSERT_FALSE(run.empty());
  const std::string first = "opscope: autocompare: first failing op: conv2d_backward_filter #";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(first + "([0-9]+) "))) << r.err;
  const std::string seq = m[1];
  EXPECT_THAT(r.err,
              HasSubstr(first + seq + " (output grad_w)\nopscope: autocompare:   " + site +
                        "\nopscope: autocompare:   framework ops: ConvolutionBackward0 > "
                        "aten::convolution_backward\nopscope: autocompare:   run it again: op-replay " +
                        run.string() + " --seq " + seq + " --acc_check\n"))
      << r.err;
  // The command replays the call: the device, without the fault now, differs from what was captured.
  const RunResult replay =
      opscope_test::run({opscope_test::paths::kOpReplay, run.string(), "--seq", seq, "--acc_check"});
  EXPECT_EQ(replay.exit_code, 1) << replay.out << replay.err;
  EXPECT_THAT(replay.out, HasSubstr("differs from the capture")) << replay.out;
  const RunResult summary = opscope_test::run({opscope_test::paths::kOpscope, "summary", run.string()});
  EXPECT_THAT(summary.out, HasSubstr("first failing op: conv2d_backward_filter #" + seq +
                                     " (output grad_w)\n    " + site + "\n"))
      << summary.out;
  EXPECT_THAT(summary.out, HasSubstr("first: conv2d_backward_filter #" + seq + " " + site)) << summary.out;
  const RunResult report = opscope_test::run({opscope_test::paths::kOpscope, "report", run.string()});
  ASSERT_EQ(report.exit_code, 0) << report.out << report.err;
  std::ifstream html(run / "report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_THAT(page, HasSubstr(site.substr(3))) << "report.html";
  // capture.db: every op with its site, each site once; the stem's convolution is module conv1.
  const RunResult db = opscope_test::run(
      {"/usr/bin/sqlite3", (run / "capture.db").string(),
       "SELECT s.module, s.forward_op FROM ops o JOIN sites s ON s.site_id = o.site_id WHERE o.name = "
       "'conv2d_forward' ORDER BY o.seq LIMIT 1; SELECT count(*) = count(DISTINCT module || '|' || source || "
       "'|' || forward_op) FROM sites; SELECT framework_op FROM ops WHERE name = 'conv2d_forward' LIMIT 1"});
  EXPECT_EQ(db.out, "conv1|\n1\naten::conv2d > aten::convolution\n") << db.out << db.err;
  fs::remove_all(dir);
}

// os.fork() after the device was used, as a data loader's worker or a script may: the child's ops raise
// with the reason (the runtime's workers are the parent's) instead of hanging, the child exits, and the
// parent computes on, alone and under opscope run.
TEST(TorchMlu, AForkedChildGetsAClearErrorAndTheParentGoesOn) {
  const std::string check = kSource + "/tests/torch_mlu/opscope_check.py";
  const fs::path dir = freshDir("fork");
  for (const bool hooked : {false, true}) {
    const RunResult r = hooked ? underOpscope("--compare", dir, {check, "fork"}) : python({check, "fork"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("child error: ")) << r.out;
    EXPECT_THAT(r.out, HasSubstr("the MLU runtime was loaded before this process was forked, so it cannot be "
                                 "used in the forked child"))
        << r.out;
    EXPECT_THAT(r.out, HasSubstr("parent: child exit status 0 [4.0, 4.0, 4.0, 4.0]")) << r.out;
    if (hooked) {
      EXPECT_THAT(r.err, HasSubstr(", 0 failed")) << r.err;
    }
  }
  fs::remove_all(dir);
}

// The rows of a query of a run's capture.db, each row's fields joined by '|'.
std::vector<std::string> dbRows(const fs::path& run, const std::string& query) {
  const RunResult r = opscope_test::run({"/usr/bin/sqlite3", (run / "capture.db").string(), query});
  std::vector<std::string> rows;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) rows.push_back(line);
  return rows;
}

// Whether one frame of a framework stack ("aten::linear > aten::addmm") matches re whole.
bool stackHas(const std::string& stack, const std::regex& re) {
  std::size_t start = 0;
  while (start <= stack.size()) {
    const std::size_t end = std::min(stack.find(" > ", start), stack.size());
    if (std::regex_match(stack.substr(start, end - start), re)) return true;
    start = end + 3;
  }
  return false;
}

// The lists in PyTorch's terms: OP_FALLBACK_LIST='aten::native_layer_norm.*' runs on the CPU exactly the
// calls made inside those ATen ops (forward and backward: native_layer_norm_backward matches too);
// OP_CAPTURE_LIST='aten::addmm' captures exactly the calls under aten::addmm of a full capture, and an item
// that matched nothing is said at the end; OP_AUTOCOMPARE_LIST='module:layer1\..*' on ResNet-18 compares
// layer1's calls only, forward and backward.
TEST(TorchMlu, ListsSelectCallsByATenOpAndModule) {
  const fs::path dir = freshDir("lists");
  const std::string check = kSource + "/tests/torch_mlu/opscope_check.py";
  const std::string row =
      "SELECT o.seq, o.name, o.framework_op, ifnull(s.module, ''), o.fallback FROM ops o "
      "LEFT JOIN sites s USING (site_id) ORDER BY o.seq";
  const RunResult all = underOpscope("--capture", dir / "all", {check, "tiny", "2"},
                                     {{"OP_FALLBACK_LIST", "aten::native_layer_norm.*"}});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const std::vector<std::string> every = dbRows(onlyRun(dir / "all"), row);
  ASSERT_GT(every.size(), 40u);
  const std::regex layer_norm("aten::native_layer_norm.*"), addmm("aten::addmm");
  std::vector<std::string> under_addmm;
  std::size_t on_cpu = 0;
  for (const std::string& r : every) {
    std::vector<std::string> f;
    std::istringstream fields(r);
    for (std::string x; std::getline(fields, x, '|');) f.push_back(x);
    ASSERT_EQ(f.size(), 5u) << r;
    const bool listed = stackHas(f[2], layer_norm);
    EXPECT_EQ(f[4], listed ? "1" : "0") << r;  // fallback
    on_cpu += listed ? 1 : 0;
    if (stackHas(f[2], addmm)) under_addmm.push_back(f[1] + "|" + f[2] + "|" + f[3]);
  }
  EXPECT_EQ(on_cpu, 4u);              // layer_norm_forward and _backward, two steps
  EXPECT_EQ(under_addmm.size(), 4u);  // fc1 and fc2, two steps

  const RunResult listed = underOpscope("--capture", dir / "addmm", {check, "tiny", "2"},
                                        {{"OP_CAPTURE_LIST", "aten::addmm,module:nosuch"}});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(dbRows(onlyRun(dir / "addmm"),
                   "SELECT o.name, o.framework_op, ifnull(s.module, '') FROM ops o LEFT JOIN sites s USING "
                   "(site_id) ORDER BY o.seq"),
            under_addmm);
  EXPECT_THAT(listed.err, HasSubstr("opscope: warning: OP_CAPTURE_LIST: 'module:nosuch' matched no call"))
      << listed.err;
  EXPECT_THAT(listed.err, Not(HasSubstr("'aten::addmm' matched no call"))) << listed.err;

  std::vector<std::string> resnet = resnetArgs(1);
  resnet.push_back("--no-eval");
  const RunResult layer1 =
      underOpscope("--compare", dir / "layer1", resnet, {{"OP_AUTOCOMPARE_LIST", R"(module:layer1\..*)"}});
  ASSERT_EQ(layer1.exit_code, 0) << layer1.err;
  const auto compared = opscope_test::readAutocompareCsv(onlyRun(dir / "layer1") / "autocompare.csv");
  std::size_t forward = 0, backward = 0;
  for (const auto& c : compared) {
    EXPECT_EQ(c.module.rfind("layer1.", 0), 0u) << c.op << " #" << c.seq << " in " << c.module;
    (c.forward_op.empty() ? forward : backward) += 1;
  }
  EXPECT_GT(forward, 8u);  // layer1's two blocks: four convolutions, four batch norms, relus, adds
  EXPECT_GT(backward, 8u);
  EXPECT_THAT(layer1.err, Not(HasSubstr("matched no call"))) << layer1.err;
  fs::remove_all(dir);
}

// The host op spans of a trace (cat mlu_op on the program's pid) and its ProfilerStep spans.
struct TraceSpans {
  std::vector<nlohmann::json> ops;
  std::size_t steps = 0;
};
TraceSpans traceSpans(const fs::path& trace) {
  std::ifstream in(trace);
  const nlohmann::json events = nlohmann::json::parse(in).at("traceEvents");
  TraceSpans spans;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X" || e.value("pid", 0LL) >= 4194304) continue;  // the device's pids
    if (e.value("cat", "") == "mlu_op") spans.ops.push_back(e);
    if (e.value("name", "").rfind("ProfilerStep#", 0) == 0) ++spans.steps;
  }
  return spans;
}

// The opscope package's regions under a plain `opscope run` (no tool in the environment):
// opscope.compare() around one training step of six compares that step's calls and no other (an
// environment's capture of the whole run labels them with the region, capture.db's ops.region);
// opscope.profile() over two steps with opscope.step() gives a trace of those steps only, each call labelled;
// OP_TIME_MEASURE_SCHEDULE counts the MNIST example's opscope.step() calls. Without the hook every call
// does nothing and one line says how to run under opscope; what the hook refuses raises, naming the item.
TEST(TorchMlu, OpscopeRegionsScopeATool) {
  const fs::path dir = freshDir("regions");
  const std::string check = kSource + "/tests/torch_mlu/opscope_check.py";
  const RunResult compared =
      underOpscope("--capture", dir / "compare", {check, "region", "compare", "6", "2", "1"});
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  const fs::path run = onlyRun(dir / "compare");
  std::set<long long> in_region;
  for (const std::string& seq : dbRows(run, "SELECT seq FROM ops WHERE region = 'compare#1'"))
    in_region.insert(std::stoll(seq));
  const std::size_t outside = dbRows(run, "SELECT seq FROM ops WHERE region IS NULL").size();
  ASSERT_GT(in_region.size(), 20u);  // a step: fills, forward, backward, the optimizer's adds
  EXPECT_EQ(*in_region.rbegin() - *in_region.begin() + 1, static_cast<long long>(in_region.size()));
  EXPECT_GE(outside, 4 * in_region.size());  // five steps outside (the first without zero_grad's fills)
  std::set<long long> compared_seqs;
  for (const auto& c : opscope_test::readAutocompareCsv(run / "autocompare.csv")) {
    compared_seqs.insert(c.seq);
    EXPECT_EQ(c.region, "compare#1") << c.op << " #" << c.seq;
    EXPECT_EQ(c.verdict, "pass") << c.op << " #" << c.seq;
  }
  EXPECT_EQ(compared_seqs, in_region);
  const RunResult summary = opscope_test::run({opscope_test::paths::kOpscope, "summary", run.string()});
  EXPECT_THAT(summary.out,
              ::testing::ContainsRegex("\n  compare#1 +autocompare +1 +" + std::to_string(in_region.size()) +
                                       " +" + std::to_string(in_region.size()) + "\n"))
      << summary.out;

  const RunResult profiled = underOpscope("", dir / "profile", {check, "region", "profile", "6", "2", "2"});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  const fs::path trace = onlyRun(dir / "profile") / "trace.json";
  ASSERT_TRUE(opscope_test::validTrace(trace.string()));
  const TraceSpans spans = traceSpans(trace);
  EXPECT_EQ(spans.steps, 2u);
  EXPECT_EQ(spans.ops.size(), 2 * in_region.size());  // two steps like the compared one
  for (const auto& op : spans.ops) EXPECT_EQ(op.at("args").value("region", ""), "profile#1") << op.dump();

  // OP_TIME_MEASURE_SCHEDULE=skip 1, wait 1, warmup 0, active 2, repeat 2 over ten steps: traces of steps
  // 2-3 and 5-6, each with the two steps' spans (two convolutions each).
  const RunResult scheduled = underOpscope("--profile", dir / "schedule", mnistArgs(10, true),
                                           {{"OP_TIME_MEASURE_SCHEDULE", "1,1,0,2,2"}});
  ASSERT_EQ(scheduled.exit_code, 0) << scheduled.err;
  std::set<std::string> traces;
  for (const auto& e : fs::directory_iterator(onlyRun(dir / "schedule")))
    if (e.path().extension() == ".json" && e.path().filename() != "run.json")
      traces.insert(e.path().filename().string());
  EXPECT_EQ(traces, (std::set<std::string>{"trace_step2.json", "trace_step5.json"}));
  for (const std::string& name : traces) {
    const TraceSpans window = traceSpans(onlyRun(dir / "schedule") / name);
    EXPECT_EQ(window.steps, 2u) << name;
    EXPECT_EQ(std::count_if(window.ops.begin(), window.ops.end(),
                            [](const auto& op) { return op.at("name") == "conv2d_forward"; }),
              4)
        << name;
  }

  const RunResult outside_opscope = python({check, "outside"});
  EXPECT_EQ(outside_opscope.exit_code, 0) << outside_opscope.err;
  EXPECT_THAT(outside_opscope.out, HasSubstr("loaded False\n"));
  EXPECT_EQ(
      std::count(outside_opscope.err.begin(), outside_opscope.err.end(), '\n') -
          static_cast<long>(outside_opscope.err.find("torch_mlu: no op fell back") != std::string::npos),
      1)
      << outside_opscope.err;
  EXPECT_THAT(outside_opscope.err,
              HasSubstr("opscope: the opscope hook is not loaded, so opscope's calls do nothing; run the "
                        "program under it: opscope run -- python3 "));

  const RunResult refused = underOpscope("", dir / "refused", {check, "refused"});
  ASSERT_EQ(refused.exit_code, 0) << refused.err;
  EXPECT_THAT(refused.out,
              HasSubstr("list: opscope.compare: list: invalid regular expression 'conv2d(' (item 1)"));
  EXPECT_THAT(refused.out, HasSubstr("option: opscope.capture: 'OP_CAPTUER_MODE=stats' is not a variable"));
  EXPECT_THAT(refused.out,
              HasSubstr("value: opscope.capture: OP_CAPTURE_MODE: 'statistics' is not a capture mode"));
  EXPECT_THAT(refused.out, HasSubstr("keyword: opscope.compare() got an unexpected keyword argument 'mode'"));
  EXPECT_THAT(refused.out, HasSubstr("threads: threads='some': use 'all' or 'current'"));
  EXPECT_THAT(refused.out,
              HasSubstr("level: dump_args level 'aten::addmm': the first argument is the level"));
  fs::remove_all(dir);
}

// opscope diff of a faulty and a healthy ResNet-18 step (statistics of every call) names the first
// divergence where the program made it: the backward of layer4.1.conv2, the last convolution of the forward.
TEST(TorchMlu, OpscopeDiffNamesTheFirstDivergenceInTheProgramsTerms) {
  const fs::path dir = freshDir("diff");
  std::vector<std::string> program = resnetArgs(1);
  program.push_back("--no-eval");
  const RunResult faulty =
      underOpscope("--capture", dir / "faulty", program,
                   {{"OP_CAPTURE_MODE", "stats"}, {"MLU_SIM_FAULT", "conv2d_backward_filter:scale=1.01"}});
  ASSERT_EQ(faulty.exit_code, 0) << faulty.err;
  const RunResult healthy =
      underOpscope("--capture", dir / "healthy", program, {{"OP_CAPTURE_MODE", "stats"}});
  ASSERT_EQ(healthy.exit_code, 0) << healthy.err;
  const RunResult d =
      opscope_test::run({opscope_test::paths::kOpscope, "diff", onlyRun(dir / "faulty").string(),
                         onlyRun(dir / "healthy").string()});
  EXPECT_EQ(d.exit_code, 1) << d.out << d.err;
  EXPECT_THAT(d.out, ::testing::ContainsRegex(
                         "first divergence: conv2d_backward_filter call 1 \\(A #[0-9]+, B #[0-9]+\\)\n  in "
                         "layer4\\.1\\.conv2 \\(backward of aten::convolution\\) at [^\n]*main\\.py:" +
                         std::to_string(lineOf(kResnet, "def main():", "out = model(")) + " in main\n"))
      << d.out;
  fs::remove_all(dir);
}

// The profiled trace in PyTorch's shape: on the program's thread every library op of ResNet-18's forward
// lies inside a PyTorch op span inside a module span (the optimizer's inside its step's region), on
// autograd's thread inside a backward call that names its module; the Perfetto importer's rules hold and
// the DevTools engine places every slice in its tree and joins every flow. An op without a device kernel
// (cumprod) is a fallback span with its copies inside. The summary has the views by PyTorch op and module.
TEST(TorchMlu, TheTraceNestsModulesPyTorchOpsAndLibraryOps) {
  const fs::path dir = freshDir("profile");
  std::vector<std::string> program = resnetArgs(1);
  program.push_back("--no-eval");
  const RunResult r = underOpscope("--profile", dir / "resnet", program);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path run = onlyRun(dir / "resnet");
  ASSERT_FALSE(run.empty());
  const std::string trace = (run / "trace.json").string();
  ASSERT_TRUE(opscope_test::validTrace(trace));
  const nlohmann::json devtools = opscope_test::runDevtools(trace);
  std::ifstream in(trace);
  const nlohmann::json events = nlohmann::json::parse(in).at("traceEvents");
  struct Span {
    double ts, end;
    std::string cat, name, module, source;
  };
  std::map<long long, std::vector<Span>> by_tid;
  std::size_t flow_starts = 0;
  const long long pid = events.at(0).at("pid");
  for (const auto& e : events) {
    if (e.at("ph") == "s") ++flow_starts;
    if (e.at("ph") != "X" || e.at("pid") != pid) continue;
    const double ts = e.at("ts");
    by_tid[e.at("tid")].push_back({ts, ts + e.at("dur").get<double>(), e.at("cat"), e.at("name"),
                                   e.at("args").value("module", std::string()),
                                   e.at("args").value("source", std::string())});
  }
  ASSERT_EQ(by_tid.size(), 2u);  // the program's thread, then autograd's
  // The innermost span of category cat around s (null: none); outermost: the outermost one.
  auto around = [](const std::vector<Span>& spans, const Span& s, const std::string& cat,
                   bool outermost = false) -> const Span* {
    const Span* found = nullptr;
    for (const Span& o : spans) {
      if (&o == &s || o.cat != cat || o.ts > s.ts || s.end > o.end) continue;
      const bool wider = found != nullptr && o.end - o.ts > found->end - found->ts;
      if (found == nullptr || wider == outermost) found = &o;
    }
    return found;
  };
  std::size_t forward = 0, optimizer = 0, backward = 0;
  std::set<std::string> outside;  // the outermost PyTorch ops of the library ops in no module or region
  for (const auto& [tid, spans] : by_tid) {
    const bool main = tid == by_tid.begin()->first;
    for (const Span& s : spans) {
      if (s.cat != "mlu_op") continue;
      const Span* op = around(spans, s, "cpu_op");
      ASSERT_NE(op, nullptr) << s.name << " at " << s.ts;
      if (!main) {  // a backward call: its forward's module (none for the loss's) and line
        ++backward;
        EXPECT_FALSE(op->source.empty()) << s.name << " at " << s.ts;
      } else if (const Span* module = around(spans, s, "python_function"); module != nullptr) {
        ++forward;
        EXPECT_EQ(module->name.rfind("nn.Module: ", 0), 0u) << module->name;
      } else if (const Span* region = around(spans, s, "user_annotation");
                 region != nullptr && region->name.rfind("Optimizer.", 0) == 0) {
        ++optimizer;
      } else {  // the script's own lines: the loss, the batch's copies
        outside.insert(around(spans, s, "cpu_op", true)->name);
      }
    }
  }
  EXPECT_GT(forward, 50u);
  EXPECT_GT(backward, 50u);
  EXPECT_GT(optimizer, 10u);
  EXPECT_EQ(outside,
            (std::set<std::string>{"aten::cross_entropy_loss", "aten::ones_like"}));  // loss, backward()
  std::size_t entries = 0;
  for (const auto& t : devtools.at("threads")) {
    EXPECT_EQ(t.at("tree_nodes"), t.at("entries")) << t.dump();  // no slice left out of its tree
    entries += t.at("entries").get<std::size_t>();
  }
  EXPECT_GT(entries, 1000u);
  EXPECT_EQ(devtools.at("flows").size(), flow_starts);
  std::ifstream summary_file(run / "summary.txt");
  const std::string summary((std::istreambuf_iterator<char>(summary_file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(summary, ::testing::ContainsRegex("\nConvolutionBackward0 +20 ")) << summary;
  EXPECT_THAT(summary, ::testing::ContainsRegex("\naten::conv2d +20 ")) << summary;
  EXPECT_THAT(summary, ::testing::ContainsRegex("\nlayer4.1.conv2 +1 ")) << summary;
  // opscope summary and the report: the same calls by framework op and by module (from time_measure.csv).
  const RunResult viewed = opscope_test::run({opscope_test::paths::kOpscope, "summary", run.string()});
  EXPECT_THAT(viewed.out,
              ::testing::ContainsRegex("By framework op \\(the library calls made in it\\):\n[^\n]*\n    "
                                       "(ConvolutionBackward0|aten::conv2d) "))
      << viewed.out;
  EXPECT_THAT(viewed.out, ::testing::ContainsRegex("\n    layer4\\.[01]\\.conv[12] ")) << viewed.out;
  ASSERT_EQ(opscope_test::run({opscope_test::paths::kOpscope, "report", run.string()}).exit_code, 0);
  std::ifstream page_file(run / "report.html");
  const std::string page((std::istreambuf_iterator<char>(page_file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(page, HasSubstr("\"by_module\":[{")) << "report.html";

  const RunResult fallback = underOpscope("--profile", dir / "fallback",
                                          {"-c",
                                           "import torch, torch_mlu\nx = torch.arange(1., "
                                           "9.).mlu()\nprint(torch.cumprod(x, 0).cpu()[-1].item())\n"});
  ASSERT_EQ(fallback.exit_code, 0) << fallback.out << fallback.err;
  EXPECT_THAT(fallback.out, HasSubstr("40320.0")) << fallback.out;
  const fs::path fallback_run = onlyRun(dir / "fallback");
  ASSERT_FALSE(fallback_run.empty());
  std::ifstream fin(fallback_run / "trace.json");
  std::vector<Span> spans;
  const nlohmann::json fallback_trace = nlohmann::json::parse(fin);
  for (const auto& e : fallback_trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts");
    spans.push_back({ts, ts + e.at("dur").get<double>(), e.at("cat"), e.at("name"), "", ""});
  }
  std::size_t copies_inside = 0, fallback_spans = 0;
  for (const Span& s : spans) {
    fallback_spans += s.cat == "fallback" && s.name.rfind("aten::cumprod", 0) == 0;
    if (s.name.rfind("mlurtMemcpy", 0) == 0) {
      if (const Span* f = around(spans, s, "fallback");
          f != nullptr && f->name.rfind("aten::cumprod", 0) == 0)
        ++copies_inside;
    }
  }
  EXPECT_GE(fallback_spans, 1u);
  EXPECT_GE(copies_inside, 2u);  // the input to the CPU, the result back
  fs::remove_all(dir);
}

}  // namespace
