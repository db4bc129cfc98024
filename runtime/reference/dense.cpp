#include "dense.h"

#include <mlu/reference.h>

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace mlu::reference::dense {
namespace {

bool fitsBlasInt(std::int64_t v) { return v <= INT_MAX; }

// The plain loops, for products whose sizes do not fit OpenBLAS's 32-bit integers.
void gemmLoops(bool trans_a, bool trans_b, double alpha, const Matrix& a, const Matrix& b, double beta,
               Matrix& c, std::int64_t k) {
  for (std::int64_t i = 0; i < c.rows; ++i) {
    for (std::int64_t j = 0; j < c.cols; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p)
        sum += (trans_a ? a.at(p, i) : a.at(i, p)) * (trans_b ? b.at(j, p) : b.at(p, j));
      c.at(i, j) = alpha * sum + (beta == 0.0 ? 0.0 : beta * c.at(i, j));
    }
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, double alpha, const Matrix& a, const Matrix& b, double beta,
          Matrix& c) {
  const std::int64_t k = trans_a ? a.rows : a.cols;
  if (c.rows == 0 || c.cols == 0) return;
  if (k == 0) {  // an empty sum: c = beta * c
    for (double& v : c.data) v = beta == 0.0 ? 0.0 : beta * v;
    return;
  }
  if (!fitsBlasInt(c.rows) || !fitsBlasInt(c.cols) || !fitsBlasInt(k) || !fitsBlasInt(a.cols) ||
      !fitsBlasInt(b.cols)) {
    gemmLoops(trans_a, trans_b, alpha, a, b, beta, c, k);
    return;
  }
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(c.rows), static_cast<int>(c.cols), static_cast<int>(k), alpha, a.data.data(),
              static_cast<int>(std::max<std::int64_t>(1, a.cols)), b.data.data(),
              static_cast<int>(std::max<std::int64_t>(1, b.cols)), beta, c.data.data(),
              static_cast<int>(std::max<std::int64_t>(1, c.cols)));
}

}  // namespace mlu::reference::dense

namespace mlu::reference {

void setBlasThreads(int threads) {
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr || std::getenv("OMP_NUM_THREADS") != nullptr) return;
  openblas_set_num_threads(threads);
}

}  // namespace mlu::reference
