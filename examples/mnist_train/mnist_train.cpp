// mnist_train — the seeds' MNIST network trained on the simulated MLU through the kernel library's C API,
// with an explicit forward and backward pass:
//   conv 1->32 3x3, ReLU, conv 32->64 3x3, ReLU, max-pool 2, dropout 0.25, flatten, linear 9216->128, ReLU,
//   dropout 0.5, linear 128->10, log-softmax, NLL loss; SGD with momentum.
// Data: generated 28x28 digit images (examples/common/digits.h), a training split and a held-out test
// split. In float16/bfloat16 mode activations and gradients use that type; the weights the optimizer
// updates stay float32 (a half copy is made for each step), as mixed-precision training does
// (examples/common/nn.h).
#include "../common/ddp.h"
#include "../common/device_tensor.h"
#include "../common/digits.h"
#include "../common/nn.h"
#include "../common/ops.h"

#include <mlu/mluops.h>
#include <mlu/mlurt.h>
#include <opscope.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using examples::check;
using examples::DeviceTensor;
using examples::Init;
using examples::Parameter;

struct Options {
  int steps = 300;
  int batch_size = 64;
  double lr = 0.01;
  double momentum = 0.9;
  std::string dtype = "float32";
  std::uint64_t seed = 1;
  bool eval = true;
  std::int64_t train_size = 60000;
  std::int64_t test_size = 10000;
  int log_interval = 10;
  bool ddp = false;
  std::vector<float> class_weights;  // empty: every digit weighs 1 (nll_loss's weight argument)
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(
      stderr,
      "mnist_train: %s\n"
      "usage: mnist_train [--steps N] [--batch-size N] [--lr X] [--momentum X]\n"
      "                   [--dtype float32|float16|bfloat16] [--seed N] [--eval | --no-eval]\n"
      "                   [--train-size N] [--test-size N] [--log-interval N]\n"
      "                   [--ddp]   (data parallel under mpirun: --batch-size is the global batch)\n"
      "                   [--class-weights W0,W1,...,W9]   (a class-weighted loss, as nll_loss(weight=))\n",
      problem);
  std::exit(2);
}

// "W0,W1,...,W9": one non-negative weight per digit, not all zero.
std::vector<float> parseClassWeights(const std::string& text) {
  std::vector<float> weights;
  std::size_t start = 0;
  bool any_positive = false;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const double w = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !std::isfinite(w) || w < 0) {
      usage(
          ("--class-weights needs 10 non-negative numbers separated by commas, got '" + text + "'").c_str());
    }
    any_positive = any_positive || w > 0;
    weights.push_back(static_cast<float>(w));
    start = comma + 1;
  }
  if (weights.size() != 10 || !any_positive) {
    usage(("--class-weights needs 10 weights (one per digit), not all zero, got '" + text + "'").c_str());
  }
  return weights;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    auto integer = [&](long lo) {
      const std::string v = value();
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < lo)
        usage((arg + " needs a whole number >= " + std::to_string(lo) + ", got '" + v + "'").c_str());
      return x;
    };
    auto real = [&] {
      const std::string v = value();
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(x) || x < 0)
        usage((arg + " needs a non-negative number, got '" + v + "'").c_str());
      return x;
    };
    if (arg == "--steps")
      o.steps = static_cast<int>(integer(0));
    else if (arg == "--batch-size")
      o.batch_size = static_cast<int>(integer(1));
    else if (arg == "--lr")
      o.lr = real();
    else if (arg == "--momentum")
      o.momentum = real();
    else if (arg == "--dtype")
      o.dtype = value();
    else if (arg == "--seed")
      o.seed = static_cast<std::uint64_t>(integer(0));
    else if (arg == "--eval")
      o.eval = true;
    else if (arg == "--no-eval")
      o.eval = false;
    else if (arg == "--train-size")
      o.train_size = integer(1);
    else if (arg == "--test-size")
      o.test_size = integer(1);
    else if (arg == "--log-interval")
      o.log_interval = static_cast<int>(integer(1));
    else if (arg == "--ddp")
      o.ddp = true;
    else if (arg == "--class-weights")
      o.class_weights = parseClassWeights(value());
    else if (arg == "--help" || arg == "-h")
      usage("train the MNIST network on the simulated MLU");
    else
      usage(("unknown argument '" + arg + "'").c_str());
  }
  if (examples::parseFloatDtype(o.dtype) == MLUOP_DTYPE_INVALID) {
    usage(("--dtype must be float32, float16 or bfloat16, got '" + o.dtype + "'").c_str());
  }
  return o;
}

class Trainer {
 public:
  Trainer(const Options& o, mluopHandle_t handle, const examples::DataParallel& ddp)
      : o_(o),
        ddp_(ddp),
        ops_(handle),
        dtype_(examples::parseFloatDtype(o.dtype)),
        params_(ops_, dtype_, o.seed) {
    check(mluopCreateConvolutionDescriptor(&conv_), "mluopCreateConvolutionDescriptor");
    const int pad[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
    check(mluopSetConvolutionDescriptor(conv_, pad, stride, dilation, 1), "mluopSetConvolutionDescriptor");
    // PyTorch's default initialization: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases.
    w1_ = &params_.add("conv1.weight", {32, 1, 3, 3}, Init::uniform(1.0 / 3.0));
    b1_ = &params_.add("conv1.bias", {32}, Init::uniform(1.0 / 3.0));
    w2_ = &params_.add("conv2.weight", {64, 32, 3, 3}, Init::uniform(1.0 / std::sqrt(32.0 * 9)));
    b2_ = &params_.add("conv2.bias", {64}, Init::uniform(1.0 / std::sqrt(32.0 * 9)));
    fc1_ = examples::Linear(params_, "fc1", 9216, 128, true);
    fc2_ = examples::Linear(params_, "fc2", 128, 10, true);
    if (!o.class_weights.empty()) {
      class_weights_ = DeviceTensor({10}, dtype_);
      class_weights_.upload(o.class_weights);
    }
  }
  ~Trainer() { mluopDestroyConvolutionDescriptor(conv_); }
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  const examples::ParameterSet& parameters() const { return params_; }

  // One SGD step on a batch (data parallel: this rank's shard, which starts at row `first_row` of the
  // global batch); the loss stays on the device until asked for.
  void step(const examples::DigitBatch& batch, int step_index, std::int64_t first_row = 0) {
    const std::int64_t n = static_cast<std::int64_t>(batch.labels.size());
    Activations a = forward(batch, n, true, static_cast<std::uint64_t>(step_index), first_row);
    backward(a, n);
    ddp_.averageGradients(params_);  // data parallel: the mean over the ranks' shards (nothing on one rank)
    params_.sgdStep(static_cast<float>(o_.lr), static_cast<float>(o_.momentum), 0.0f);
    last_loss_ = std::move(a.loss);
  }

  // The last step's loss (data parallel: the mean of the ranks', the global batch's).
  double lastLoss() const { return ddp_.sum(static_cast<double>(last_loss_.download()[0])) / ddp_.size(); }

  // Evaluates the test split: average loss and correct predictions (data parallel: the ranks take turns
  // with the batches and add up).
  std::pair<double, std::int64_t> evaluate(const examples::DigitDataset& data) {
    constexpr std::int64_t kBatch = 500;
    double loss_sum = 0;
    std::int64_t correct = 0;
    for (std::int64_t first = kBatch * ddp_.rank(); first < data.size(); first += kBatch * ddp_.size()) {
      const std::int64_t n = std::min(kBatch, data.size() - first);
      const examples::DigitBatch batch = data.batch(first, n);
      Activations a = forward(batch, n, false, 0);
      DeviceTensor pred({n}, MLUOP_DTYPE_INT64);
      check(mluopArgmax(h(), 1, false, a.logp.desc(), a.logp.data(), pred.desc(), pred.data()), "argmax");
      const std::vector<std::int64_t> p = pred.downloadInt64();
      for (std::int64_t i = 0; i < n; ++i)
        correct += p[static_cast<std::size_t>(i)] == batch.labels[static_cast<std::size_t>(i)];
      loss_sum += static_cast<double>(a.loss.download()[0]) * static_cast<double>(n);
    }
    return {ddp_.sum(loss_sum) / static_cast<double>(data.size()),
            static_cast<std::int64_t>(ddp_.sum(static_cast<double>(correct)))};
  }

 private:
  struct Activations {
    DeviceTensor x, target, c1, a1, c2, a2, pooled, indices, d1, mask1, flat, h, ah, d2, mask2, logits, logp,
        loss;
  };

  mluopHandle_t h() const { return ops_.handle(); }
  // The loss's optional class weights (null without --class-weights).
  mluopTensorDescriptor_t weightDesc() const {
    return o_.class_weights.empty() ? nullptr : class_weights_.desc();
  }
  const void* weightData() const { return o_.class_weights.empty() ? nullptr : class_weights_.data(); }

  // Scratch memory big enough for every convolution call seen so far.
  void* workspace(std::size_t bytes) {
    if (bytes > workspace_.bytes())
      workspace_ = DeviceTensor({static_cast<std::int64_t>(bytes)}, MLUOP_DTYPE_UINT8);
    return bytes == 0 ? nullptr : workspace_.data();
  }

  void conv(const DeviceTensor& x, const Parameter& w, const Parameter& b, const DeviceTensor& y) {
    std::size_t ws = 0;
    check(mluopGetConvolutionForwardWorkspaceSize(h(), conv_, x.desc(), w.model.desc(), y.desc(), &ws),
          "workspace");
    void* wsp = workspace(ws);
    check(mluopConvolutionForward(h(), conv_, x.desc(), x.data(), w.model.desc(), w.model.data(),
                                  b.model.desc(), b.model.data(), wsp, ws, y.desc(), y.data()),
          "conv2d_forward");
  }

  // offset: Philox blocks (4 elements each) to skip, so that a shard draws its rows' part of the global
  // batch's mask.
  void dropout(const DeviceTensor& x, float p, std::uint64_t seed, std::uint64_t offset,
               const DeviceTensor& y, const DeviceTensor& mask) {
    check(mluopDropoutForward(h(), p, seed, offset, x.desc(), x.data(), y.desc(), y.data(), mask.desc(),
                              mask.data()),
          "dropout_forward");
  }

  Activations forward(const examples::DigitBatch& batch, std::int64_t n, bool train, std::uint64_t step,
                      std::int64_t first_row = 0) {
    Activations a;
    a.x = DeviceTensor({n, 1, 28, 28}, dtype_);
    a.x.upload(batch.images);
    a.target = DeviceTensor({n}, MLUOP_DTYPE_INT64);
    a.target.upload(batch.labels);

    a.c1 = DeviceTensor({n, 32, 26, 26}, dtype_);
    conv(a.x, *w1_, *b1_, a.c1);
    a.a1 = DeviceTensor({n, 32, 26, 26}, dtype_);
    ops_.relu(a.c1, a.a1);
    a.c2 = DeviceTensor({n, 64, 24, 24}, dtype_);
    conv(a.a1, *w2_, *b2_, a.c2);
    a.a2 = DeviceTensor({n, 64, 24, 24}, dtype_);
    ops_.relu(a.c2, a.a2);
    a.pooled = DeviceTensor({n, 64, 12, 12}, dtype_);
    a.indices = DeviceTensor({n, 64, 12, 12}, MLUOP_DTYPE_INT64);
    const int k2[2] = {2, 2}, pad0[2] = {0, 0};
    check(mluopMaxPool2dForward(h(), k2, 2, k2, 2, pad0, 2, nullptr, 0, false, a.a2.desc(), a.a2.data(),
                                a.pooled.desc(), a.pooled.data(), a.indices.desc(), a.indices.data()),
          "max_pool2d_forward");
    // Dropout seeds: one stream per step and layer, derived from --seed.
    const std::uint64_t seed = o_.seed * 1000003u + step * 2u;
    if (train) {
      a.d1 = DeviceTensor({n, 64, 12, 12}, dtype_);
      a.mask1 = DeviceTensor({n, 64, 12, 12}, MLUOP_DTYPE_UINT8);
      dropout(a.pooled, 0.25f, seed, static_cast<std::uint64_t>(first_row) * 9216 / 4, a.d1, a.mask1);
    } else {
      a.d1 = a.pooled;
    }
    a.flat = a.d1.reshaped({n, 9216});
    a.h = DeviceTensor({n, 128}, dtype_);
    fc1_.forward(ops_, a.flat, a.h);
    a.ah = DeviceTensor({n, 128}, dtype_);
    ops_.relu(a.h, a.ah);
    if (train) {
      a.d2 = DeviceTensor({n, 128}, dtype_);
      a.mask2 = DeviceTensor({n, 128}, MLUOP_DTYPE_UINT8);
      dropout(a.ah, 0.5f, seed + 1, static_cast<std::uint64_t>(first_row) * 128 / 4, a.d2, a.mask2);
    } else {
      a.d2 = a.ah;
    }
    a.logits = DeviceTensor({n, 10}, dtype_);
    fc2_.forward(ops_, a.d2, a.logits);
    a.logp = DeviceTensor({n, 10}, dtype_);
    check(mluopLogSoftmaxForward(h(), 1, a.logits.desc(), a.logits.data(), a.logp.desc(), a.logp.data()),
          "log_softmax_forward");
    a.loss = DeviceTensor({}, dtype_);
    check(mluopNllLossForward(h(), MLUOP_REDUCTION_MEAN, -100, a.logp.desc(), a.logp.data(), a.target.desc(),
                              a.target.data(), weightDesc(), weightData(), a.loss.desc(), a.loss.data()),
          "nll_loss_forward");
    return a;
  }

  void convBackward(const DeviceTensor& x, Parameter& w, Parameter& b, const DeviceTensor& dy,
                    const DeviceTensor* dx) {
    std::size_t ws = 0;
    check(mluopGetConvolutionBackwardFilterWorkspaceSize(h(), conv_, x.desc(), dy.desc(), w.grad.desc(), &ws),
          "workspace");
    void* wsp = workspace(ws);
    check(mluopConvolutionBackwardFilter(h(), conv_, x.desc(), x.data(), dy.desc(), dy.data(), wsp, ws,
                                         w.grad.desc(), w.grad.data()),
          "conv2d_backward_filter");
    check(mluopConvolutionBackwardBias(h(), dy.desc(), dy.data(), b.grad.desc(), b.grad.data()),
          "conv2d_backward_bias");
    if (dx != nullptr) {
      check(mluopGetConvolutionBackwardDataWorkspaceSize(h(), conv_, dy.desc(), w.model.desc(), dx->desc(),
                                                         &ws),
            "workspace");
      wsp = workspace(ws);
      check(mluopConvolutionBackwardData(h(), conv_, dy.desc(), dy.data(), w.model.desc(), w.model.data(),
                                         wsp, ws, dx->desc(), dx->data()),
            "conv2d_backward_data");
    }
  }

  void backward(const Activations& a, std::int64_t n) {
    DeviceTensor one({}, dtype_);
    ops_.fill(one, 1.0);
    DeviceTensor dlogp({n, 10}, dtype_);
    check(mluopNllLossBackward(h(), MLUOP_REDUCTION_MEAN, -100, one.desc(), one.data(), a.target.desc(),
                               a.target.data(), weightDesc(), weightData(), dlogp.desc(), dlogp.data()),
          "nll_loss_backward");
    DeviceTensor dlogits({n, 10}, dtype_);
    check(mluopLogSoftmaxBackward(h(), 1, a.logp.desc(), a.logp.data(), dlogp.desc(), dlogp.data(),
                                  dlogits.desc(), dlogits.data()),
          "log_softmax_backward");
    DeviceTensor dd2({n, 128}, dtype_);
    fc2_.backward(ops_, a.d2, dlogits, &dd2);
    DeviceTensor dah({n, 128}, dtype_);
    check(mluopDropoutBackward(h(), 0.5f, dd2.desc(), dd2.data(), a.mask2.desc(), a.mask2.data(), dah.desc(),
                               dah.data()),
          "dropout_backward");
    DeviceTensor dh({n, 128}, dtype_);
    ops_.reluBackward(dah, a.h, dh);
    DeviceTensor dflat({n, 9216}, dtype_);
    fc1_.backward(ops_, a.flat, dh, &dflat);
    const DeviceTensor dd1 = dflat.reshaped({n, 64, 12, 12});
    DeviceTensor dpooled({n, 64, 12, 12}, dtype_);
    check(mluopDropoutBackward(h(), 0.25f, dd1.desc(), dd1.data(), a.mask1.desc(), a.mask1.data(),
                               dpooled.desc(), dpooled.data()),
          "dropout_backward");
    DeviceTensor da2({n, 64, 24, 24}, dtype_);
    const int k2[2] = {2, 2}, pad0[2] = {0, 0};
    check(mluopMaxPool2dBackward(h(), k2, 2, k2, 2, pad0, 2, nullptr, 0, false, dpooled.desc(),
                                 dpooled.data(), a.indices.desc(), a.indices.data(), da2.desc(), da2.data()),
          "max_pool2d_backward");
    DeviceTensor dc2({n, 64, 24, 24}, dtype_);
    ops_.reluBackward(da2, a.c2, dc2);
    DeviceTensor da1({n, 32, 26, 26}, dtype_);
    convBackward(a.a1, *w2_, *b2_, dc2, &da1);
    DeviceTensor dc1({n, 32, 26, 26}, dtype_);
    ops_.reluBackward(da1, a.c1, dc1);
    convBackward(a.x, *w1_, *b1_, dc1, nullptr);
  }

  const Options& o_;
  const examples::DataParallel& ddp_;
  examples::Ops ops_;
  mluopDataType_t dtype_;
  examples::ParameterSet params_;
  mluopConvolutionDescriptor_t conv_ = nullptr;
  Parameter *w1_ = nullptr, *b1_ = nullptr, *w2_ = nullptr, *b2_ = nullptr;
  examples::Linear fc1_, fc2_;
  DeviceTensor workspace_;
  DeviceTensor last_loss_;
  DeviceTensor class_weights_;  // [10] with --class-weights, else empty (no weight tensor passed)
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseOptions(argc, argv);
  // --ddp: one rank per process of the MPI job (mpirun); declared first, so it finalizes MPI last.
  examples::DataParallel ddp(o.ddp, &argc, &argv);
  if (o.batch_size % ddp.size() != 0) {
    usage(("--batch-size " + std::to_string(o.batch_size) + " does not divide among " +
           std::to_string(ddp.size()) + " ranks")
              .c_str());
  }
  if (!ddp.leader() && std::freopen("/dev/null", "w", stdout) == nullptr)
    std::perror("freopen");  // rank 0 reports
  mluopHandle_t handle = nullptr;
  check(mluopCreate(&handle), "mluopCreate");
  ddp.useQueueOf(handle);

  const examples::DigitDataset train(o.train_size, o.seed * 2 + 1);
  const examples::DigitDataset test(o.test_size, o.seed * 2 + 2 + 0x5eed0000ull);
  std::printf(
      "mnist_train: %d steps, batch %d, lr %g, momentum %g, %s, seed %llu, %lld train / %lld test images\n",
      o.steps, o.batch_size, o.lr, o.momentum, o.dtype.c_str(), static_cast<unsigned long long>(o.seed),
      static_cast<long long>(o.train_size), static_cast<long long>(o.test_size));
  if (ddp.enabled())
    std::printf("data parallel: %d ranks, %lld images of the global batch each\n", ddp.size(),
                static_cast<long long>(ddp.shardSize(o.batch_size)));

  const auto start = std::chrono::steady_clock::now();
  {
    Trainer trainer(o, handle, ddp);
    ddp.broadcastParameters(trainer.parameters());  // every rank starts from rank 0's weights
    const std::int64_t shard_first = ddp.shardFirst(o.batch_size), shard = ddp.shardSize(o.batch_size);
    for (int step = 0; step < o.steps; ++step) {
      const std::int64_t first = static_cast<std::int64_t>(step) * o.batch_size;
      trainer.step(train.batch(first + shard_first, shard), step, shard_first);
      opscope_step();  // for OP_TIME_MEASURE_SCHEDULE; nothing without opscope
      if (step % o.log_interval == 0 || step + 1 == o.steps) {
        const std::int64_t seen = (first + o.batch_size) % o.train_size;
        const int epoch = static_cast<int>((first + o.batch_size - 1) / o.train_size);
        std::printf("Train Epoch: %d [%lld/%lld (%.0f%%)]\tLoss: %.6f\n", epoch, static_cast<long long>(seen),
                    static_cast<long long>(o.train_size),
                    100.0 * static_cast<double>(seen) / static_cast<double>(o.train_size),
                    trainer.lastLoss());
        std::fflush(stdout);
      }
    }
    if (o.eval) {
      const auto [loss, correct] = trainer.evaluate(test);
      std::printf("\nTest set: Average loss: %.4f, Accuracy: %lld/%lld (%.1f%%)\n", loss,
                  static_cast<long long>(correct), static_cast<long long>(test.size()),
                  100.0 * static_cast<double>(correct) / static_cast<double>(test.size()));
    }
    check(mlurtDeviceSynchronize(), "mlurtDeviceSynchronize");
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("mnist_train: done in %.1f s\n", seconds);
  check(mluopDestroy(handle), "mluopDestroy");
  return 0;
}
