// llama_train — a tiny Llama-style decoder trained on the simulated MLU through the kernel library's C API,
// with an explicit forward and backward pass, on a character-level text (examples/data):
//
//   token embedding
//   N blocks of:  h = h + Wo · attention(rope(q), rope(k), v),  q, k, v = Wqkv · rms_norm(h)   (causal)
//                 h = h + W_down · (silu(W_gate · x) * W_up · x),  x = rms_norm(h)            (SwiGLU)
//   final rms_norm, LM head (a separate linear), cross-entropy; AdamW with warmup and cosine decay.
//
// The q, k and v projections are one [(H + 2·Hkv)·Dh, dim] linear: q, k and v are strided views of its output
// ([B, S, H, D] memory seen as [B, H, S, D] by the attention), rotated in place by RoPE. --kv-heads Hkv < H
// is grouped-query attention (Llama 2 70B, Llama 3, Mistral): Hkv key/value heads, each shared by H / Hkv
// query heads (Hkv = H by default: multi-head attention). Likewise the gate
// and up projections write the two halves of one [N, 2·ffn] buffer (a fused gate_up layout), so silu and mul
// read them as strided views. The backward pass is written out op by op: linear layers through matmul with
// transpose flags, residual gradients with add. float16 / bfloat16: activations and gradients in that type,
// float32 master weights and AdamW state (examples/common/nn.h); float16 adds dynamic loss scaling.
#include "../common/ddp.h"
#include "../common/device_tensor.h"
#include "../common/nn.h"
#include "../common/ops.h"

#include <mlu/mluops.h>
#include <mlu/mlurt.h>
#include <opscope.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using examples::check;
using examples::DeviceTensor;
using examples::Dims;
using examples::Init;
using examples::Linear;
using examples::Ops;
using examples::Parameter;

constexpr double kNormEps = 1e-5;
constexpr double kRopeTheta = 10000.0;
// rms_norm's rstd and the attention's lse are float32 whatever the compute dtype.
constexpr mluopDataType_t kStatDtype = MLUOP_DTYPE_FLOAT;

struct Options {
  int steps = 200;
  int batch_size = 16;
  int seq_len = 64;
  int dim = 128;
  int layers = 2;
  int heads = 4;
  int kv_heads = 0;  // 0: heads
  double lr = 3e-3;
  std::string dtype = "float32";
  std::uint64_t seed = 1;
  std::string data;  // empty: the default text
  int log_interval = 10;
  int eval_batches = 8;
  bool grad_check = false;
  bool ddp = false;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(
      stderr,
      "llama_train: %s\n"
      "usage: llama_train [--steps N] [--batch-size N] [--seq-len N] [--dim N] [--layers N]\n"
      "                   [--heads N] [--kv-heads N] [--lr X] [--dtype float32|bfloat16|float16] [--seed N]\n"
      "                   [--data PATH] [--log-interval N] [--eval-batches N] [--grad-check]\n"
      "                   [--ddp]   (data parallel under mpirun: --batch-size is the global batch)\n",
      problem.c_str());
  std::exit(2);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + arg);
      return argv[++i];
    };
    auto integer = [&](long lo, long hi = 1L << 30) {
      const std::string v = value();
      char* end = nullptr;
      errno = 0;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
        usage(arg + " needs a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
              ", got '" + v + "'");
      return static_cast<int>(x);
    };
    if (arg == "--steps")
      o.steps = integer(0);
    else if (arg == "--batch-size")
      o.batch_size = integer(1, 4096);
    else if (arg == "--seq-len")
      o.seq_len = integer(2, 4096);
    else if (arg == "--dim")
      o.dim = integer(2, 4096);
    else if (arg == "--layers")
      o.layers = integer(1, 64);
    else if (arg == "--heads")
      o.heads = integer(1, 256);
    else if (arg == "--kv-heads")
      o.kv_heads = integer(1, 256);
    else if (arg == "--lr") {
      const std::string v = value();
      char* end = nullptr;
      o.lr = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(o.lr) || o.lr <= 0)
        usage("--lr needs a positive number, got '" + v + "'");
    } else if (arg == "--dtype")
      o.dtype = value();
    else if (arg == "--seed")
      o.seed = static_cast<std::uint64_t>(integer(0, 2147483647));
    else if (arg == "--data")
      o.data = value();
    else if (arg == "--log-interval")
      o.log_interval = integer(1);
    else if (arg == "--eval-batches")
      o.eval_batches = integer(0, 100000);
    else if (arg == "--grad-check")
      o.grad_check = true;
    else if (arg == "--ddp")
      o.ddp = true;
    else if (arg == "--help" || arg == "-h")
      usage("train a tiny Llama-style model on a character-level text on the simulated MLU");
    else
      usage("unknown argument '" + arg + "'");
  }
  if (examples::parseFloatDtype(o.dtype) == MLUOP_DTYPE_INVALID)
    usage("--dtype must be float32, bfloat16 or float16, got '" + o.dtype + "'");
  if (o.grad_check && o.dtype != "float32") usage("--grad-check needs --dtype float32");
  if (o.grad_check && o.ddp) usage("--grad-check runs on one rank, not with --ddp");
  if (o.dim % o.heads != 0)
    usage("--dim " + std::to_string(o.dim) + " is not a multiple of --heads " + std::to_string(o.heads));
  if ((o.dim / o.heads) % 2 != 0)
    usage("the head size --dim / --heads = " + std::to_string(o.dim / o.heads) + " must be even (RoPE)");
  if (o.kv_heads == 0) o.kv_heads = o.heads;
  if (o.heads % o.kv_heads != 0)
    usage("--heads " + std::to_string(o.heads) + " is not a multiple of --kv-heads " +
          std::to_string(o.kv_heads) + " (each key/value head serves the same number of query heads)");
  return o;
}

// The default text: next to the binary (the build copies examples/data to bin/data), else in the source
// tree the binary was built from.
std::string defaultDataPath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path next_to_binary = exe.parent_path() / "data" / "tinyshakespeare.txt";
    if (std::filesystem::exists(next_to_binary, ec)) return next_to_binary.string();
  }
  return LLAMA_TRAIN_SOURCE_DATA;
}

// The text as token ids over its sorted set of bytes (a character-level vocabulary).
struct Corpus {
  std::vector<char> vocab;
  std::vector<std::int64_t> tokens;
  std::int64_t train_size = 0;  // tokens [0, train_size) train, the last 10% evaluate
};

Corpus loadCorpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    usage("cannot read the training text '" + path + "': " + std::strerror(errno) + " (pass --data PATH)");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  Corpus c;
  std::vector<bool> seen(256, false);
  for (unsigned char ch : s) seen[ch] = true;
  std::vector<std::int64_t> id(256, -1);
  for (int ch = 0; ch < 256; ++ch) {
    if (!seen[static_cast<std::size_t>(ch)]) continue;
    id[static_cast<std::size_t>(ch)] = static_cast<std::int64_t>(c.vocab.size());
    c.vocab.push_back(static_cast<char>(ch));
  }
  c.tokens.reserve(s.size());
  for (unsigned char ch : s) c.tokens.push_back(id[ch]);
  c.train_size = static_cast<std::int64_t>(c.tokens.size()) * 9 / 10;
  return c;
}

// Entropy (nats) of the character frequencies of tokens [0, n): the loss of the best model that ignores
// context.
double unigramEntropy(const Corpus& c, std::int64_t n) {
  std::vector<double> count(c.vocab.size(), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    count[static_cast<std::size_t>(c.tokens[static_cast<std::size_t>(i)])] += 1;
  double h = 0;
  for (double k : count) {
    if (k > 0) h -= k / static_cast<double>(n) * std::log(k / static_cast<double>(n));
  }
  return h;
}

struct Config {
  std::int64_t vocab, dim, layers, heads, kv_heads, head_dim, ffn, batch, seq;
  mluopDataType_t dtype;
  std::uint64_t seed;
  std::int64_t tokens() const { return batch * seq; }
  // The width of the fused q|k|v projection's output: H query heads, then Hkv key and Hkv value heads.
  std::int64_t qkvWidth() const { return (heads + 2 * kv_heads) * head_dim; }
};

// One decoder block's parameters.
struct Block {
  Parameter* attn_norm;
  Linear qkv, wo;
  Parameter* mlp_norm;
  Linear gate, up, down;
};

// What the forward pass keeps for the backward pass, allocated once (the batch shape never changes).
struct BlockActivations {
  DeviceTensor h_in, xn, rstd1, qkv, attn, lse, h_mid, xn2, rstd2, gate_up, gate, up, act, prod, h_out;
};

class LlamaTrainer {
 public:
  LlamaTrainer(const Config& cfg, mluopHandle_t handle, const examples::DataParallel& ddp)
      : cfg_(cfg),
        ddp_(ddp),
        ops_(handle),
        dtype_(cfg.dtype),
        params_(ops_, dtype_, cfg.seed),
        loss_scale_(dtype_ == MLUOP_DTYPE_HALF ? 65536.0 : 1.0) {
    const std::int64_t d = cfg.dim, f = cfg.ffn;
    // GPT-2's initialization: N(0, 0.02) weights, the projections into the residual stream scaled by
    // 1/sqrt(2 * layers); norm weights 1 (no weight decay on them).
    const Init w = Init::normal(0.02);
    const Init w_out = Init::normal(0.02 / std::sqrt(2.0 * static_cast<double>(cfg.layers)));
    embed_ = &params_.add("embed", {cfg.vocab, d}, w);
    for (std::int64_t l = 0; l < cfg.layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      Block b;
      b.attn_norm = &params_.add(p + "attn_norm", {d}, Init::constant(1.0), false);
      b.qkv = Linear(params_, p + "qkv", d, cfg.qkvWidth(), false, w);
      b.wo = Linear(params_, p + "wo", d, d, false, w_out);
      b.mlp_norm = &params_.add(p + "mlp_norm", {d}, Init::constant(1.0), false);
      b.gate = Linear(params_, p + "gate", d, f, false, w);
      b.up = Linear(params_, p + "up", d, f, false, w);
      b.down = Linear(params_, p + "down", f, d, false, w_out);
      blocks_.push_back(b);
    }
    final_norm_ = &params_.add("final_norm", {d}, Init::constant(1.0), false);
    lm_head_ = Linear(params_, "lm_head", d, cfg.vocab, false, w);
    allocate();
  }

  std::int64_t parameterCount() const { return params_.count(); }
  const examples::ParameterSet& parameters() const { return params_; }

  // Forward and backward on one batch, then (unless float16 gradients overflowed) one AdamW step. The
  // loss goes to the device scalar `loss`; returns whether the step was applied.
  bool trainStep(const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& y, double lr,
                 const DeviceTensor& loss) {
    forward(x, y, loss);
    backward();
    ddp_.averageGradients(params_);  // data parallel: the mean over the ranks' shards (nothing on one rank)
    if (dtype_ == MLUOP_DTYPE_HALF) {
      // Dynamic loss scaling: skip the step and halve the scale on inf/NaN gradients; double it after
      // kGrowthInterval good steps in a row.
      if (!params_.gradsFinite()) {
        loss_scale_ = std::max(1.0, loss_scale_ / 2);
        good_steps_ = 0;
        ++skipped_steps_;
        return false;
      }
      if (++good_steps_ % kGrowthInterval == 0) loss_scale_ = std::min(kMaxLossScale, loss_scale_ * 2);
    }
    ++adam_step_;
    params_.adamwStep({static_cast<float>(lr), 0.9f, 0.95f, 1e-8f, 0.1f}, adam_step_,
                      static_cast<float>(loss_scale_));
    return true;
  }

  // The mean loss of one batch without the backward pass.
  void evaluate(const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& y,
                const DeviceTensor& loss) {
    forward(x, y, loss);
  }

  // Checks the explicit backward pass against the forward pass: for each parameter p, the derivative of the
  // loss along p's gradient direction u = g/|g| (which is |g|) against the central difference
  // (L(w + h u) - L(w - h u)) / 2h. float32 only. Returns the largest relative error.
  double gradCheck(const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& y) {
    const DeviceTensor loss({}, MLUOP_DTYPE_FLOAT);
    forward(x, y, loss);
    backward();
    double worst = 0;
    for (const auto& p : params_.all()) {
      double norm2 = 0;
      for (float g : p->grad.download()) norm2 += static_cast<double>(g) * g;
      const double norm = std::sqrt(norm2);
      if (norm == 0) continue;
      // A step that moves the loss by about 1e-3, well above float32 rounding (within [0.01, 0.1]).
      const double h = std::clamp(1e-3 / norm, 1e-2, 1e-1);
      const auto lossAt = [&](double alpha) {  // moves the weights by alpha * g, returns the loss there
        ops_.add(p->master, p->grad, p->master, static_cast<float>(alpha));
        forward(x, y, loss);
        return static_cast<double>(loss.download()[0]);
      };
      const double plus = lossAt(h / norm);
      const double minus = lossAt(-2 * h / norm);
      lossAt(h / norm);  // back where it started (to rounding)
      const double numeric = (plus - minus) / (2 * h);
      const double error = std::fabs(numeric - norm) / norm;
      worst = std::max(worst, error);
      std::printf("grad check %-22s |g| %.6e  finite difference %.6e  relative error %.1e\n", p->name.c_str(),
                  norm, numeric, error);
    }
    return worst;
  }

  int skippedSteps() const { return skipped_steps_; }
  double lossScale() const { return loss_scale_; }

 private:
  static constexpr int kGrowthInterval = 100;
  static constexpr double kMaxLossScale = 16777216.0;  // 2^24

  DeviceTensor act(Dims dims) const { return DeviceTensor(std::move(dims), dtype_); }

  // [N, (H + 2 Hkv) Dh] q|k|v rows -> part p (0 q with H heads, 1 k and 2 v with Hkv) as [B, S, heads, Dh]
  // (RoPE's layout) or [B, heads, S, Dh] (attention's).
  std::int64_t partHeads(int p) const { return p == 0 ? cfg_.heads : cfg_.kv_heads; }
  std::int64_t partOffset(int p) const {
    return (p == 0 ? 0 : cfg_.heads + (p - 1) * cfg_.kv_heads) * cfg_.head_dim;
  }
  DeviceTensor qkvBSHD(const DeviceTensor& qkv, int p) const {
    const std::int64_t b = cfg_.batch, s = cfg_.seq, h = partHeads(p), dh = cfg_.head_dim,
                       w = cfg_.qkvWidth();
    return qkv.view({b, s, h, dh}, {s * w, w, dh, 1}, partOffset(p));
  }
  DeviceTensor qkvBHSD(const DeviceTensor& qkv, int p) const {
    const std::int64_t b = cfg_.batch, s = cfg_.seq, h = partHeads(p), dh = cfg_.head_dim,
                       w = cfg_.qkvWidth();
    return qkv.view({b, h, s, dh}, {s * w, dh, w, 1}, partOffset(p));
  }
  // [N, D] rows (heads side by side) as [B, H, S, Dh].
  DeviceTensor headsBHSD(const DeviceTensor& t) const {
    const std::int64_t b = cfg_.batch, s = cfg_.seq, h = cfg_.heads, dh = cfg_.head_dim, d = cfg_.dim;
    return t.view({b, h, s, dh}, {s * d, dh, d, 1});
  }

  void allocate() {
    const std::int64_t n = cfg_.tokens(), d = cfg_.dim, f = cfg_.ffn, v = cfg_.vocab;
    tokens_ = DeviceTensor({n}, MLUOP_DTYPE_INT64);
    targets_ = DeviceTensor({n}, MLUOP_DTYPE_INT64);
    for (std::int64_t l = 0; l < cfg_.layers; ++l) {
      BlockActivations a;
      a.h_in = l == 0 ? act({n, d}) : acts_.back().h_out;
      a.xn = act({n, d});
      a.rstd1 = DeviceTensor({n}, kStatDtype);
      a.qkv = act({n, cfg_.qkvWidth()});
      a.attn = act({n, d});
      a.lse = DeviceTensor({cfg_.batch, cfg_.heads, cfg_.seq}, MLUOP_DTYPE_FLOAT);
      a.h_mid = act({n, d});
      a.xn2 = act({n, d});
      a.rstd2 = DeviceTensor({n}, kStatDtype);
      a.gate_up = act({n, 2 * f});
      a.gate = a.gate_up.view({n, f}, {2 * f, 1}, 0);
      a.up = a.gate_up.view({n, f}, {2 * f, 1}, f);
      a.act = act({n, f});
      a.prod = act({n, f});
      a.h_out = act({n, d});
      acts_.push_back(a);
    }
    hf_ = act({n, d});
    rstdf_ = DeviceTensor({n}, kStatDtype);
    logits_ = act({n, v});
    logits32_ = dtype_ == MLUOP_DTYPE_FLOAT ? logits_ : DeviceTensor({n, v}, MLUOP_DTYPE_FLOAT);
    // gradient buffers, reused by every block
    grad_scale_ = DeviceTensor({}, MLUOP_DTYPE_FLOAT);
    dlogits32_ = DeviceTensor({n, v}, MLUOP_DTYPE_FLOAT);
    dlogits_ = dtype_ == MLUOP_DTYPE_FLOAT ? dlogits32_ : act({n, v});
    dh_ = act({n, d});
    dtmp_ = act({n, d});
    dx_ = act({n, d});
    dxn_ = act({n, d});
    dqkv_ = act({n, cfg_.qkvWidth()});
    dF1_ = act({n, f});
    dF2_ = act({n, f});
    dF3_ = act({n, f});
  }

  void forward(const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& y,
               const DeviceTensor& loss) {
    tokens_.upload(x);
    targets_.upload(y);
    ops_.embeddingForward(embed_->model, tokens_, acts_[0].h_in);
    for (std::size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      BlockActivations& a = acts_[l];
      // attention: h_mid = h_in + Wo attention(rope(q), rope(k), v)
      ops_.rmsNormForward(kNormEps, a.h_in, b.attn_norm->model, a.xn, a.rstd1);
      b.qkv.forward(ops_, a.xn, a.qkv);
      ops_.ropeForward(kRopeTheta, qkvBSHD(a.qkv, 0), qkvBSHD(a.qkv, 0));  // in place
      ops_.ropeForward(kRopeTheta, qkvBSHD(a.qkv, 1), qkvBSHD(a.qkv, 1));
      ops_.attentionForward(qkvBHSD(a.qkv, 0), qkvBHSD(a.qkv, 1), qkvBHSD(a.qkv, 2), headsBHSD(a.attn),
                            a.lse);
      b.wo.forward(ops_, a.attn, dtmp_);
      ops_.add(a.h_in, dtmp_, a.h_mid);
      // SwiGLU MLP: h_out = h_mid + W_down (silu(W_gate xn2) * W_up xn2)
      ops_.rmsNormForward(kNormEps, a.h_mid, b.mlp_norm->model, a.xn2, a.rstd2);
      b.gate.forward(ops_, a.xn2, a.gate);
      b.up.forward(ops_, a.xn2, a.up);
      ops_.silu(a.gate, a.act);
      ops_.mul(a.act, a.up, a.prod);
      b.down.forward(ops_, a.prod, dtmp_);
      ops_.add(a.h_mid, dtmp_, a.h_out);
    }
    ops_.rmsNormForward(kNormEps, acts_.back().h_out, final_norm_->model, hf_, rstdf_);
    lm_head_.forward(ops_, hf_, logits_);
    // The loss in float32 whatever the compute dtype (as autocast does).
    if (dtype_ != MLUOP_DTYPE_FLOAT) ops_.copy(logits_, logits32_);
    ops_.crossEntropyForward(logits32_, targets_, loss);
  }

  void backward() {
    ops_.fill(grad_scale_, loss_scale_);
    ops_.crossEntropyBackward(grad_scale_, logits32_, targets_, dlogits32_);
    if (dtype_ != MLUOP_DTYPE_FLOAT) ops_.copy(dlogits32_, dlogits_);
    lm_head_.backward(ops_, hf_, dlogits_, &dxn_);
    ops_.rmsNormBackward(dxn_, acts_.back().h_out, rstdf_, final_norm_->model, dh_, final_norm_->grad);
    // dh_ holds the gradient of the residual stream, from the top block down.
    for (std::size_t l = blocks_.size(); l-- > 0;) {
      const Block& b = blocks_[l];
      const BlockActivations& a = acts_[l];
      // MLP: prod = silu(gate) * up (dgate reuses dprod's buffer once dprod has been read)
      const DeviceTensor &dprod = dF1_, &dact = dF2_, &dup = dF3_, &dgate = dF1_;
      b.down.backward(ops_, a.prod, dh_, &dprod);
      ops_.mul(dprod, a.act, dup);
      ops_.mul(dprod, a.up, dact);
      ops_.siluBackward(dact, a.gate, dgate);
      b.gate.backward(ops_, a.xn2, dgate, &dxn_);
      b.up.backward(ops_, a.xn2, dup, &dtmp_);
      ops_.add(dxn_, dtmp_, dxn_);
      ops_.rmsNormBackward(dxn_, a.h_mid, a.rstd2, b.mlp_norm->model, dx_, b.mlp_norm->grad);
      ops_.add(dh_, dx_, dh_);  // the residual: d h_mid = d h_out + the gradient through the MLP
      // attention
      b.wo.backward(ops_, a.attn, dh_, &dtmp_);
      ops_.attentionBackward(headsBHSD(dtmp_), qkvBHSD(a.qkv, 0), qkvBHSD(a.qkv, 1), qkvBHSD(a.qkv, 2),
                             headsBHSD(a.attn), a.lse, qkvBHSD(dqkv_, 0), qkvBHSD(dqkv_, 1),
                             qkvBHSD(dqkv_, 2));
      ops_.ropeBackward(kRopeTheta, qkvBSHD(dqkv_, 0), qkvBSHD(dqkv_, 0));  // in place
      ops_.ropeBackward(kRopeTheta, qkvBSHD(dqkv_, 1), qkvBSHD(dqkv_, 1));
      b.qkv.backward(ops_, a.xn, dqkv_, &dxn_);
      ops_.rmsNormBackward(dxn_, a.h_in, a.rstd1, b.attn_norm->model, dx_, b.attn_norm->grad);
      ops_.add(dh_, dx_, dh_);  // d h_in = d h_mid + the gradient through the attention
    }
    ops_.embeddingBackward(dh_, tokens_, embed_->grad);
  }

  Config cfg_;
  const examples::DataParallel& ddp_;
  Ops ops_;
  mluopDataType_t dtype_;
  examples::ParameterSet params_;
  double loss_scale_;  // float16: the dynamic loss scale; 1 otherwise
  Parameter* embed_ = nullptr;
  std::vector<Block> blocks_;
  Parameter* final_norm_ = nullptr;
  Linear lm_head_;

  DeviceTensor tokens_, targets_;
  std::vector<BlockActivations> acts_;
  DeviceTensor hf_, rstdf_, logits_, logits32_;
  DeviceTensor grad_scale_, dlogits32_, dlogits_, dh_, dtmp_, dx_, dxn_, dqkv_, dF1_, dF2_, dF3_;

  int good_steps_ = 0;
  int skipped_steps_ = 0;
  std::int64_t adam_step_ = 0;
};

// Random training windows: x = tokens[p, p+S), y = tokens[p+1, p+S+1) for `global` uniform positions p
// per step, of which this rank takes [first, first + cfg.batch) (all of them on one rank).
class Batcher {
 public:
  Batcher(const Corpus& c, const Config& cfg, std::uint64_t seed, std::int64_t global, std::int64_t first)
      : c_(c), cfg_(cfg), rng_(seed), global_(global), first_(first) {}
  void next(std::vector<std::int64_t>& x, std::vector<std::int64_t>& y) {
    std::uniform_int_distribution<std::int64_t> pos(0, c_.train_size - cfg_.seq - 1);
    x.clear();
    y.clear();
    for (std::int64_t b = 0; b < global_; ++b) {
      const std::int64_t p = pos(rng_);  // every rank draws every position: the same stream
      if (b >= first_ && b < first_ + cfg_.batch) window(p, x, y);
    }
  }
  void window(std::int64_t p, std::vector<std::int64_t>& x, std::vector<std::int64_t>& y) const {
    const auto at = c_.tokens.begin() + p;
    x.insert(x.end(), at, at + cfg_.seq);
    y.insert(y.end(), at + 1, at + cfg_.seq + 1);
  }

 private:
  const Corpus& c_;
  const Config& cfg_;
  std::mt19937_64 rng_;
  std::int64_t global_, first_;
};

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void train(const Options& o, const Config& cfg, LlamaTrainer& trainer, Batcher& batcher,
           const examples::DataParallel& ddp) {
  // Every step's loss stays on the device (one float32 per step) until it is logged.
  const DeviceTensor losses({std::max(o.steps, 1)}, MLUOP_DTYPE_FLOAT);
  const int warmup = std::max(1, std::min(20, o.steps / 10));
  std::vector<std::int64_t> x, y;
  auto window_start = std::chrono::steady_clock::now();
  int window_steps = 0;
  for (int step = 0; step < o.steps; ++step) {
    // linear warmup, then cosine decay to 10% of --lr
    const double progress = static_cast<double>(step - warmup) / std::max(1, o.steps - warmup);
    const double lr = step < warmup ? o.lr * (step + 1) / warmup
                                    : o.lr * (0.1 + 0.45 * (1 + std::cos(3.141592653589793 * progress)));
    batcher.next(x, y);
    const DeviceTensor loss = losses.view({}, {}, step);
    const bool applied = trainer.trainStep(x, y, lr, loss);
    opscope_step();  // for OP_TIME_MEASURE_SCHEDULE; nothing without opscope
    ++window_steps;
    if ((step + 1) % o.log_interval == 0 || step == 0 || step + 1 == o.steps) {
      // waits for the step to finish; data parallel: the mean of the ranks' losses (the global batch's)
      const double value = ddp.sum(static_cast<double>(loss.download()[0])) / ddp.size();
      const double tokens_per_s = static_cast<double>(window_steps * cfg.tokens() * ddp.size()) /
                                  std::max(1e-9, secondsSince(window_start));
      std::printf("step %5d  loss %.6f  tokens/s %.0f%s\n", step + 1, value, tokens_per_s,
                  applied ? "" : "  (skipped: float16 gradients overflowed)");
      std::fflush(stdout);
      window_start = std::chrono::steady_clock::now();
      window_steps = 0;
    }
  }
  if (o.steps > 0) {
    ddp.average(losses);
    const std::vector<float> all = losses.download();
    const int last = std::min(o.steps, 10);
    double mean = 0;
    for (int i = o.steps - last; i < o.steps; ++i)
      mean += static_cast<double>(all[static_cast<std::size_t>(i)]);
    std::printf("final train loss %.4f (mean of the last %d steps)\n", mean / last, last);
  }
  if (o.dtype == "float16") {
    std::printf("float16 loss scaling: %d step(s) skipped, final scale %g\n", trainer.skippedSteps(),
                trainer.lossScale());
  }
}

// The mean loss over fixed windows evenly spread over the held-out last 10% of the text.
void evaluateHeldOut(const Options& o, const Config& cfg, const Corpus& corpus, LlamaTrainer& trainer,
                     const Batcher& batcher, const examples::DataParallel& ddp) {
  // Each global batch of --batch-size windows is shared out among the ranks as in training.
  const std::int64_t windows = static_cast<std::int64_t>(o.eval_batches) * o.batch_size;
  const std::int64_t first = ddp.shardFirst(o.batch_size);
  const std::int64_t span = static_cast<std::int64_t>(corpus.tokens.size()) - corpus.train_size - cfg.seq - 1;
  const DeviceTensor losses({o.eval_batches}, MLUOP_DTYPE_FLOAT);
  std::vector<std::int64_t> x, y;
  for (int b = 0; b < o.eval_batches; ++b) {
    x.clear();
    y.clear();
    for (std::int64_t i = 0; i < cfg.batch; ++i) {
      const std::int64_t w = b * o.batch_size + first + i;
      batcher.window(corpus.train_size + (windows > 1 ? w * span / (windows - 1) : 0), x, y);
    }
    trainer.evaluate(x, y, losses.view({}, {}, b));
  }
  const std::vector<float> all = losses.download();
  const double mean =
      ddp.sum(std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size())) / ddp.size();
  std::printf("eval loss %.4f (%d batches of %lld x %lld held-out tokens)\n", mean, o.eval_batches,
              static_cast<long long>(o.batch_size), static_cast<long long>(cfg.seq));
}

// --grad-check: exit status 0 when the explicit backward pass matches the forward pass.
int gradCheck(LlamaTrainer& trainer, Batcher& batcher) {
  std::vector<std::int64_t> x, y;
  batcher.next(x, y);
  const double worst = trainer.gradCheck(x, y);
  constexpr double kTolerance = 0.05;
  std::printf("grad check: largest relative error %.1e (%s, tolerance %.0e)\n", worst,
              worst <= kTolerance ? "ok" : "FAILED", kTolerance);
  return worst <= kTolerance ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseOptions(argc, argv);
  // --ddp: one rank per process of the MPI job (mpirun); declared first, so it finalizes MPI last.
  examples::DataParallel ddp(o.ddp, &argc, &argv);
  if (o.batch_size % ddp.size() != 0)
    usage("--batch-size " + std::to_string(o.batch_size) + " does not divide among " +
          std::to_string(ddp.size()) + " ranks");
  if (!ddp.leader() && std::freopen("/dev/null", "w", stdout) == nullptr)
    std::perror("freopen");  // rank 0 reports
  const std::string data_path = o.data.empty() ? defaultDataPath() : o.data;
  const Corpus corpus = loadCorpus(data_path);
  const std::int64_t total = static_cast<std::int64_t>(corpus.tokens.size());
  if (corpus.train_size < o.seq_len + 1 || total - corpus.train_size < o.seq_len + 1) {
    usage("the text '" + data_path + "' (" + std::to_string(total) +
          " characters) is too short for --seq-len " + std::to_string(o.seq_len) +
          ": each 90%/10% split needs more than seq-len characters");
  }
  Config cfg;
  cfg.vocab = static_cast<std::int64_t>(corpus.vocab.size());
  cfg.dim = o.dim;
  cfg.layers = o.layers;
  cfg.heads = o.heads;
  cfg.kv_heads = o.kv_heads;
  cfg.head_dim = o.dim / o.heads;
  cfg.ffn = (8 * o.dim / 3 + 15) / 16 * 16;  // Llama's 8/3 * dim hidden size, rounded up to a multiple of 16
  cfg.batch = ddp.shardSize(o.batch_size);   // this rank's share of the global batch
  cfg.seq = o.seq_len;
  cfg.dtype = examples::parseFloatDtype(o.dtype);
  cfg.seed = o.seed;

  std::printf(
      "llama_train: %d steps, batch %d x %d tokens, dim %d, %d layers, %d heads%s, lr %g, %s, seed %llu\n",
      o.steps, o.batch_size, o.seq_len, o.dim, o.layers, o.heads,
      o.kv_heads == o.heads ? "" : (" (" + std::to_string(o.kv_heads) + " key/value heads)").c_str(), o.lr,
      o.dtype.c_str(), static_cast<unsigned long long>(o.seed));
  std::printf("data: %s, %lld characters (%lld train / %lld eval)\n", data_path.c_str(),
              static_cast<long long>(total), static_cast<long long>(corpus.train_size),
              static_cast<long long>(total - corpus.train_size));
  if (ddp.enabled())
    std::printf("data parallel: %d ranks, %lld sequences of the global batch each\n", ddp.size(),
                static_cast<long long>(cfg.batch));
  std::printf("vocab size %lld, ln(vocab) %.4f nats, unigram entropy of the training text %.4f nats\n",
              static_cast<long long>(cfg.vocab), std::log(static_cast<double>(cfg.vocab)),
              unigramEntropy(corpus, corpus.train_size));

  mluopHandle_t handle = nullptr;
  check(mluopCreate(&handle), "mluopCreate");
  ddp.useQueueOf(handle);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  {
    LlamaTrainer trainer(cfg, handle, ddp);
    ddp.broadcastParameters(trainer.parameters());  // every rank starts from rank 0's weights
    std::printf("parameters: %lld (ffn hidden size %lld)\n", static_cast<long long>(trainer.parameterCount()),
                static_cast<long long>(cfg.ffn));
    std::fflush(stdout);
    Batcher batcher(corpus, cfg, o.seed, o.batch_size, ddp.shardFirst(o.batch_size));
    if (o.grad_check) {
      status = gradCheck(trainer, batcher);
    } else {
      train(o, cfg, trainer, batcher, ddp);
      if (o.eval_batches > 0) evaluateHeldOut(o, cfg, corpus, trainer, batcher, ddp);
    }
    check(mlurtDeviceSynchronize(), "mlurtDeviceSynchronize");
  }
  std::printf("llama_train: done in %.1f s\n", secondsSince(start));
  check(mluopDestroy(handle), "mluopDestroy");
  return status;
}
