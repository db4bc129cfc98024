// CPU reference of scaled_dot_product_attention: plainly written in float64, one query row at a time,
// with the row's scores materialized. The backward recomputes the probabilities from the given lse
// (P = exp(S - lse)) and uses D_i = rowsum(dO ∘ O) of the given o, as the device does, so both agree for
// any inputs. A row whose lse is -inf (no visible key) has P = 0: o = 0 and zero gradients.
#include "attention_shapes.h"
#include "element.h"
#include "validate.h"

#include <mlu/reference.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace mlu::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Element [b, h, i, d] of a 4-d tensor as float64, and a writer.
template <typename T>
struct View4 {
  T* data;
  std::int64_t s0, s1, s2, s3;
  explicit View4(const TensorView& t)
      : data(typed<T>(t)), s0(t.stride(0)), s1(t.stride(1)), s2(t.stride(2)), s3(t.stride(3)) {}
  T& at(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t d) const {
    return data[b * s0 + h * s1 + i * s2 + d * s3];
  }
  double get(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t d) const {
    return load<double>(at(b, h, i, d));
  }
};

// lse [B, H, Sq]: float32, or float64 with float64 q.
double loadLse(const TensorView& lse, std::int64_t b, std::int64_t h, std::int64_t i) {
  const std::int64_t off = b * lse.stride(0) + h * lse.stride(1) + i * lse.stride(2);
  return lse.dtype == MLUOP_DTYPE_DOUBLE ? typed<const double>(lse)[off]
                                         : static_cast<double>(typed<const float>(lse)[off]);
}
void storeLse(const TensorView& lse, std::int64_t b, std::int64_t h, std::int64_t i, double value) {
  const std::int64_t off = b * lse.stride(0) + h * lse.stride(1) + i * lse.stride(2);
  if (lse.dtype == MLUOP_DTYPE_DOUBLE) {
    typed<double>(lse)[off] = value;
  } else {
    typed<float>(lse)[off] = static_cast<float>(value);
  }
}

Status noKernel(const TensorView& t) {
  return notSupported("the reference has no kernel for {}", dtypeName(t.dtype));
}

// scores[j] = scale * q[b, h, i, :] . k[b, h, j, :] for the visible keys j.
template <typename T>
void scoresOf(const View4<const T>& q, const View4<const T>& k, std::int64_t b, std::int64_t h,
              std::int64_t i, std::int64_t d_size, double scale, std::vector<double>& scores) {
  for (std::size_t j = 0; j < scores.size(); ++j) {
    double s = 0;
    for (std::int64_t d = 0; d < d_size; ++d)
      s += q.get(b, h, i, d) * k.get(b, h, static_cast<std::int64_t>(j), d);
    scores[j] = scale * s;
  }
}

}  // namespace

Status run(const scaled_dot_product_attention_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const attention::Sizes n = attention::sizesOf(args.q, args.k, args.v);
  const double scale = attention::effectiveScale(args.scale, n.d);
  const bool ok = dispatchFloating(args.q.dtype, [&]<typename T>() {
    const View4<const T> q(args.q), k(args.k), v(args.v);
    const View4<T> o(args.o);
    std::vector<double> scores;
    for (std::int64_t b = 0; b < n.batch; ++b) {
      for (std::int64_t h = 0; h < n.heads; ++h) {
        for (std::int64_t i = 0; i < n.sq; ++i) {
          scores.assign(static_cast<std::size_t>(attention::visibleKeys(args.causal, i, n.sk)), 0.0);
          scoresOf(q, k, b, h, i, n.d, scale, scores);
          double lse = -kInf;
          if (!scores.empty()) {
            double m = -kInf;
            for (const double s : scores) m = std::max(m, s);
            double sum = 0;
            for (const double s : scores) sum += std::exp(s - m);
            lse = m + std::log(sum);
          }
          storeLse(args.lse, b, h, i, lse);
          for (std::int64_t e = 0; e < n.dv; ++e) {
            double acc = 0;
            for (std::size_t j = 0; j < scores.size(); ++j) {
              acc += std::exp(scores[j] - lse) * v.get(b, h, static_cast<std::int64_t>(j), e);
            }
            o.at(b, h, i, e) = store<T>(acc);
          }
        }
      }
    }
  });
  return ok ? Status::success() : noKernel(args.q);
}

// dV_j = sum_i P_ij dO_i;  dS_ij = P_ij (dO_i . V_j - D_i);  dQ_i = scale sum_j dS_ij K_j;
// dK_j = scale sum_i dS_ij Q_i.
Status run(const scaled_dot_product_attention_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const attention::Sizes n = attention::sizesOf(args.q, args.k, args.v);
  const double scale = attention::effectiveScale(args.scale, n.d);
  const bool ok = dispatchFloating(args.q.dtype, [&]<typename T>() {
    const View4<const T> q(args.q), k(args.k), v(args.v), o(args.o), go(args.grad_o);
    const View4<T> gq(args.grad_q), gk(args.grad_k), gv(args.grad_v);
    std::vector<double> scores;
    std::vector<double> dq(static_cast<std::size_t>(n.sq * n.d));
    std::vector<double> dk(static_cast<std::size_t>(n.sk * n.d));
    std::vector<double> dv(static_cast<std::size_t>(n.sk * n.dv));
    for (std::int64_t b = 0; b < n.batch; ++b) {
      for (std::int64_t h = 0; h < n.heads; ++h) {
        std::fill(dq.begin(), dq.end(), 0.0);
        std::fill(dk.begin(), dk.end(), 0.0);
        std::fill(dv.begin(), dv.end(), 0.0);
        for (std::int64_t i = 0; i < n.sq; ++i) {
          const double lse = loadLse(args.lse, b, h, i);
          if (lse == -kInf) continue;  // no visible key: P = 0
          scores.assign(static_cast<std::size_t>(attention::visibleKeys(args.causal, i, n.sk)), 0.0);
          scoresOf(q, k, b, h, i, n.d, scale, scores);
          double d_i = 0;
          for (std::int64_t e = 0; e < n.dv; ++e) d_i += go.get(b, h, i, e) * o.get(b, h, i, e);
          for (std::size_t jj = 0; jj < scores.size(); ++jj) {
            const auto j = static_cast<std::int64_t>(jj);
            const double p = std::exp(scores[jj] - lse);
            double dp = 0;
            for (std::int64_t e = 0; e < n.dv; ++e) {
              dp += go.get(b, h, i, e) * v.get(b, h, j, e);
              dv[static_cast<std::size_t>(j * n.dv + e)] += p * go.get(b, h, i, e);
            }
            const double ds = p * (dp - d_i);
            for (std::int64_t d = 0; d < n.d; ++d) {
              dq[static_cast<std::size_t>(i * n.d + d)] += scale * ds * k.get(b, h, j, d);
              dk[static_cast<std::size_t>(j * n.d + d)] += scale * ds * q.get(b, h, i, d);
            }
          }
        }
        for (std::int64_t i = 0; i < n.sq; ++i) {
          for (std::int64_t d = 0; d < n.d; ++d)
            gq.at(b, h, i, d) = store<T>(dq[static_cast<std::size_t>(i * n.d + d)]);
        }
        for (std::int64_t j = 0; j < n.sk; ++j) {
          for (std::int64_t d = 0; d < n.d; ++d)
            gk.at(b, h, j, d) = store<T>(dk[static_cast<std::size_t>(j * n.d + d)]);
          for (std::int64_t e = 0; e < n.dv; ++e) {
            gv.at(b, h, j, e) = store<T>(dv[static_cast<std::size_t>(j * n.dv + e)]);
          }
        }
      }
    }
  });
  return ok ? Status::success() : noKernel(args.q);
}

}  // namespace mlu::reference
