// CPU reference of scaled_dot_product_attention in float64, one (batch, head) at a time with its whole
// score matrix materialized and every product a dgemm through OpenBLAS (dense.h). The backward recomputes the
// probabilities from the given lse (P = exp(S - lse)) and uses D_i = rowsum(dO ∘ O) of the given o, as the
// device does, so both agree for any inputs. A row whose lse is -inf (no visible key) has P = 0: o = 0 and
// zero gradients. Grouped-query attention: query head h reads key/value head h / (H / Hkv), whose gradients
// are the sums of its query heads' (in head order).
#include "attention_shapes.h"
#include "dense.h"
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

// The [rows, cols] matrix [b, h, :, :] of a 4-d tensor, as float64.
template <typename T>
void gatherHead(const TensorView& t, std::int64_t b, std::int64_t h, dense::Matrix& out) {
  dense::gather(typed<const T>(t) + b * t.stride(0) + h * t.stride(1), t.dim(2), t.dim(3), t.stride(2),
                t.stride(3), out);
}
template <typename T>
void scatterHead(const dense::Matrix& m, const TensorView& t, std::int64_t b, std::int64_t h) {
  dense::scatter(m, typed<T>(t) + b * t.stride(0) + h * t.stride(1), t.stride(2), t.stride(3));
}

// Turns the scores s [sq, sk] into p = exp(s - lse) on the visible keys of each row, 0 elsewhere and on
// rows whose lse is -inf (no visible key).
void exponentiate(bool causal, const std::vector<double>& lse, dense::Matrix& s) {
  for (std::int64_t i = 0; i < s.rows; ++i) {
    const double l = lse[static_cast<std::size_t>(i)];
    const std::int64_t visible = l == -kInf ? 0 : attention::visibleKeys(causal, i, s.cols);
    double* row = s.row(i);
    for (std::int64_t j = 0; j < visible; ++j) row[j] = std::exp(row[j] - l);
    std::fill(row + visible, row + s.cols, 0.0);
  }
}

}  // namespace

Status run(const scaled_dot_product_attention_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const attention::Sizes n = attention::sizesOf(args.q, args.k, args.v);
  const double scale = attention::effectiveScale(args.scale, n.d);
  const bool ok = dispatchFloating(args.q.dtype, [&]<typename T>() {
    dense::Matrix q, k, v, s, o;
    std::vector<double> lse(static_cast<std::size_t>(n.sq));
    for (std::int64_t b = 0; b < n.batch; ++b) {
      for (std::int64_t h = 0; h < n.heads; ++h) {
        gatherHead<T>(args.q, b, h, q);
        gatherHead<T>(args.k, b, n.kvHead(h), k);
        gatherHead<T>(args.v, b, n.kvHead(h), v);
        // The scores, each row's log-sum-exp over its visible keys, then o = p v.
        s.shape(n.sq, n.sk);
        dense::gemm(false, true, scale, q, k, 0.0, s);
        for (std::int64_t i = 0; i < n.sq; ++i) {
          const std::int64_t visible = attention::visibleKeys(args.causal, i, n.sk);
          const double* row = s.row(i);
          double value = -kInf;
          if (visible > 0) {
            const double m = *std::max_element(row, row + visible);
            double sum = 0;
            for (std::int64_t j = 0; j < visible; ++j) sum += std::exp(row[j] - m);
            value = m + std::log(sum);
          }
          lse[static_cast<std::size_t>(i)] = value;
          storeLse(args.lse, b, h, i, value);
        }
        exponentiate(args.causal, lse, s);
        o.shape(n.sq, n.dv);
        dense::gemm(false, false, 1.0, s, v, 0.0, o);
        scatterHead<T>(o, args.o, b, h);
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
    dense::Matrix q, k, v, o, go, p, dp, dq, dk, dv, dk_sum, dv_sum;
    std::vector<double> lse(static_cast<std::size_t>(n.sq));
    for (std::int64_t b = 0; b < n.batch; ++b) {
      for (std::int64_t h = 0; h < n.heads; ++h) {
        // A key/value head's gradients sum over the query heads of its group (in head order).
        const bool first_of_group = h % n.group() == 0, last_of_group = h % n.group() == n.group() - 1;
        gatherHead<T>(args.q, b, h, q);
        gatherHead<T>(args.k, b, n.kvHead(h), k);
        gatherHead<T>(args.v, b, n.kvHead(h), v);
        gatherHead<T>(args.o, b, h, o);
        gatherHead<T>(args.grad_o, b, h, go);
        for (std::int64_t i = 0; i < n.sq; ++i) lse[static_cast<std::size_t>(i)] = loadLse(args.lse, b, h, i);
        p.shape(n.sq, n.sk);
        dense::gemm(false, true, scale, q, k, 0.0, p);
        exponentiate(args.causal, lse, p);
        // dp = dO v^T, then dS = p (dp - D_i) in place, with D_i = dO_i . o_i.
        dp.shape(n.sq, n.sk);
        dense::gemm(false, true, 1.0, go, v, 0.0, dp);
        for (std::int64_t i = 0; i < n.sq; ++i) {
          double d_i = 0;
          for (std::int64_t e = 0; e < n.dv; ++e) d_i += go.at(i, e) * o.at(i, e);
          double* row = dp.row(i);
          const double* prow = p.row(i);
          for (std::int64_t j = 0; j < n.sk; ++j) row[j] = prow[j] * (row[j] - d_i);
        }
        dv.shape(n.sk, n.dv);
        dense::gemm(true, false, 1.0, p, go, 0.0, dv);
        dq.shape(n.sq, n.d);
        dense::gemm(false, false, scale, dp, k, 0.0, dq);
        dk.shape(n.sk, n.d);
        dense::gemm(true, false, scale, dp, q, 0.0, dk);
        scatterHead<T>(dq, args.grad_q, b, h);
        if (first_of_group) {
          dk_sum = dk;
          dv_sum = dv;
        } else {
          for (std::size_t i = 0; i < dk.data.size(); ++i) dk_sum.data[i] += dk.data[i];
          for (std::size_t i = 0; i < dv.data.size(); ++i) dv_sum.data[i] += dv.data[i];
        }
        if (last_of_group) {
          scatterHead<T>(dk_sum, args.grad_k, b, n.kvHead(h));
          scatterHead<T>(dv_sum, args.grad_v, b, n.kvHead(h));
        }
      }
    }
  });
  return ok ? Status::success() : noKernel(args.q);
}

// ---- variable-length attention: each packed sequence through the dense op as one batch entry ----

namespace {

// Every element of a packed [T, H, X] tensor (or lse [H, T]) set to value.
void fillAll(const TensorView& t, double value) {
  const OffsetWalker w(t);
  dispatchFloating(t.dtype, [&]<typename T>() {
    for (std::int64_t i = 0; i < t.numel(); ++i) typed<T>(t)[w.offsetOf(i)] = store<T>(value);
  });
}

bool offsets(const TensorView& cu_seqlens_q, const TensorView& cu_seqlens_k, std::int64_t tq, std::int64_t tk,
             std::vector<std::int64_t>& cu_q, std::vector<std::int64_t>& cu_k) {
  cu_q = attention::readOffsets(cu_seqlens_q);
  cu_k = attention::readOffsets(cu_seqlens_k);
  return attention::validOffsets(cu_q, tq) && attention::validOffsets(cu_k, tk);
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

// Rows no sequence covers get o = 0 and lse = -inf; offsets that are not non-decreasing within the rows
// give NaN everywhere (as on the device).
Status run(const attention_varlen_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  std::vector<std::int64_t> cu_q, cu_k;
  const bool valid = offsets(args.cu_seqlens_q, args.cu_seqlens_k, args.q.dim(0), args.k.dim(0), cu_q, cu_k);
  fillAll(args.o, valid ? 0.0 : kNaN);
  fillAll(args.lse, valid ? -kInf : kNaN);
  for (std::size_t b = 0; valid && b + 1 < cu_q.size(); ++b) {
    if (cu_q[b + 1] == cu_q[b]) continue;
    scaled_dot_product_attention_forward_args dense;
    dense.causal = args.causal;
    dense.scale = args.scale;
    dense.q = attention::sequenceView(args.q, cu_q[b], cu_q[b + 1]);
    dense.k = attention::sequenceView(args.k, cu_k[b], cu_k[b + 1]);
    dense.v = attention::sequenceView(args.v, cu_k[b], cu_k[b + 1]);
    dense.o = attention::sequenceView(args.o, cu_q[b], cu_q[b + 1]);
    dense.lse = attention::sequenceLse(args.lse, cu_q[b], cu_q[b + 1]);
    MLU_RETURN_IF_ERROR(run(dense));
  }
  return Status::success();
}

Status run(const attention_varlen_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  std::vector<std::int64_t> cu_q, cu_k;
  const bool valid = offsets(args.cu_seqlens_q, args.cu_seqlens_k, args.q.dim(0), args.k.dim(0), cu_q, cu_k);
  for (const TensorView* g : {&args.grad_q, &args.grad_k, &args.grad_v}) fillAll(*g, valid ? 0.0 : kNaN);
  for (std::size_t b = 0; valid && b + 1 < cu_q.size(); ++b) {
    if (cu_q[b + 1] == cu_q[b] || cu_k[b + 1] == cu_k[b]) continue;  // no key or no query: zero gradients
    const auto q_rows = [&](const TensorView& t) { return attention::sequenceView(t, cu_q[b], cu_q[b + 1]); };
    const auto k_rows = [&](const TensorView& t) { return attention::sequenceView(t, cu_k[b], cu_k[b + 1]); };
    scaled_dot_product_attention_backward_args dense;
    dense.causal = args.causal;
    dense.scale = args.scale;
    dense.grad_o = q_rows(args.grad_o);
    dense.q = q_rows(args.q);
    dense.k = k_rows(args.k);
    dense.v = k_rows(args.v);
    dense.o = q_rows(args.o);
    dense.lse = attention::sequenceLse(args.lse, cu_q[b], cu_q[b + 1]);
    dense.grad_q = q_rows(args.grad_q);
    dense.grad_k = k_rows(args.grad_k);
    dense.grad_v = k_rows(args.grad_v);
    MLU_RETURN_IF_ERROR(run(dense));
  }
  return Status::success();
}

}  // namespace mlu::reference
