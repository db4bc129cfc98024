// Device kernels of the matrix-product and convolution ops, and the convolution workspace-size queries.
//
// matmul and linear run the blocked GEMM engine (gemm_kernel.h) over tiles of the output split across the
// simulated cores. The convolutions are im2col + GEMM per (image, group): each core lowers its images into
// its own slice of the caller's workspace, which therefore holds one im2col matrix per core (plus, for the
// backward passes, a float32 accumulator per core):
//   forward          y_g = W_g [Cout/g, C/g*kh*kw] x col_g [C/g*kh*kw, Ho*Wo] + bias
//   backward data    col_g = W_g^T x dy_g, scattered back into the image (col2im), summed in float32
//   backward filter  dW_g += dy_g x col_g^T over the core's images (several at once when their outputs are
//                    small: one GEMM as deep as their pixels); the cores' partial sums are then added in
//                    core order (deterministic for a given core count); when those partials would outweigh
//                    the work (few output pixels, many filters), one GEMM over the whole batch instead,
//                    grad_w's columns split across the cores
// Forward and backward data lower several images into one GEMM too when an image's output is small.
// A 1x1 kernel with stride 1 and no padding needs no im2col: the image is read in place.
#include "context.h"
#include "device.h"
#include "gemm_kernel.h"

#include "../ops/element.h"
#include "../ops/gemm_shapes.h"
#include "../ops/validate.h"

#include <mlu/mluops.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <tuple>
#include <utility>

namespace mlu {
namespace {

using gemm::Axis;
using gemm::Bias;
using gemm::Dest;
using gemm::Operand;
using gemm::Output;
using gemm_shapes::ConvGeometry;

// Multiply-adds below which a GEMM is not worth splitting across cores.
constexpr double kParallelMacs = 1 << 18;

// Runs fn(slot, begin, end) for `slots` contiguous shares of [0, tasks), one share per simulated core.
template <typename Fn>
void runShares(std::int64_t tasks, int slots, const Fn& fn) {
  if (tasks <= 0) return;
  const std::int64_t ways = std::clamp<std::int64_t>(slots, 1, tasks);
  parallelFor(ways, 1, static_cast<int>(ways), [&](std::int64_t s0, std::int64_t s1) {
    for (std::int64_t s = s0; s < s1; ++s) fn(static_cast<int>(s), tasks * s / ways, tasks * (s + 1) / ways);
  });
}

// Part `index` of [0, total) cut into `parts` pieces on multiples of `align`: {begin, size}.
std::pair<std::int64_t, std::int64_t> splitAligned(std::int64_t total, std::int64_t parts, std::int64_t index,
                                                   std::int64_t align) {
  const std::int64_t units = (total + align - 1) / align;
  const std::int64_t begin = std::min(total, units * index / parts * align);
  const std::int64_t end = std::min(total, units * (index + 1) / parts * align);
  return {begin, end - begin};
}

// `data` advanced by `elements` elements of dtype.
const void* advance(const void* data, mluopDataType_t dtype, std::int64_t elements) {
  return static_cast<const char*>(data) + elements * static_cast<std::int64_t>(dtypeSize(dtype));
}
void* advance(void* data, mluopDataType_t dtype, std::int64_t elements) {
  return static_cast<char*>(data) + elements * static_cast<std::int64_t>(dtypeSize(dtype));
}

// One GEMM (or a batch of them) whose output tiles are split across cores: task t computes part
// t % parts of batch entry t / parts, along the rows when split_rows, else along the columns.
struct TiledGemm {
  std::int64_t m = 0, n = 0, k = 0, batches = 1, parts = 1;
  bool split_rows = true;
  int ways = 1;  // cores to run the tasks on

  // Chooses the split for `cores` cores: whole batch entries when they share out evenly, else tiles.
  void plan(int cores) {
    const double macs = static_cast<double>(batches) * static_cast<double>(m) * static_cast<double>(n) *
                        static_cast<double>(k);
    ways = macs < kParallelMacs ? 1 : cores;
    parts = (batches % ways == 0 || batches >= 4 * ways) ? 1 : ways;
    split_rows = m >= n;
  }
  std::int64_t tasks() const { return batches * parts; }
  // Rows [m0, m0 + mm) and columns [n0, n0 + nn) of task t's batch entry.
  void region(std::int64_t t, std::int64_t& m0, std::int64_t& mm, std::int64_t& n0, std::int64_t& nn) const {
    const std::int64_t part = t % parts;
    m0 = 0;
    mm = m;
    n0 = 0;
    nn = n;
    if (split_rows) {
      std::tie(m0, mm) = splitAligned(m, parts, part, gemm::kMr);
    } else {
      std::tie(n0, nn) = splitAligned(n, parts, part, gemm::kNr);
    }
  }
};

// ---- matmul ----

void runMatmul(const matmul_args& args, int cores) {
  gemm_shapes::MatmulShape s = gemm_shapes::matmulShape(args.trans_a, args.trans_b, args.a, args.b);
  gemm_shapes::setOutputStrides(s, args.c);
  const TensorView& c = args.c;
  Operand a{args.a.data, args.a.dtype, Axis::strided(s.a_row_stride), Axis::strided(s.a_col_stride)};
  const Operand b{args.b.data, args.b.dtype, Axis::strided(s.b_row_stride), Axis::strided(s.b_col_stride)};
  Output out{c.data, c.dtype, Axis::strided(c.stride(c.ndim - 2)), Axis::strided(c.stride(c.ndim - 1))};
  TiledGemm tiled{s.m, s.n, s.k, s.batchCount()};
  if (tiled.m == 0 || tiled.n == 0 || tiled.batches == 0) return;

  // When every batch entry multiplies by the same b, the batch is one tall GEMM: fold it into the rows.
  const bool b_shared = std::all_of(s.b_batch_stride.begin(), s.b_batch_stride.begin() + s.batch_ndim,
                                    [](auto v) { return v == 0; });
  int batch_ndim = s.batch_ndim;
  if (tiled.batches > 1 && b_shared) {
    Axis rows, out_rows;
    for (int d = 0; d < s.batch_ndim; ++d) {
      const auto i = static_cast<std::size_t>(d);
      rows.append(s.batch[i], s.a_batch_stride[i]);
      out_rows.append(s.batch[i], s.c_batch_stride[i]);
    }
    rows.append(s.m, s.a_row_stride);
    out_rows.append(s.m, c.stride(c.ndim - 2));
    a.rows = rows;
    out.rows = out_rows;
    tiled.m *= tiled.batches;
    tiled.batches = 1;
    batch_ndim = 0;
  }
  tiled.plan(cores);

  runShares(tiled.tasks(), tiled.ways, [&](int, std::int64_t t0, std::int64_t t1) {
    gemm::Scratch scratch;
    for (std::int64_t t = t0; t < t1; ++t) {
      // Offsets of this task's batch entry in a, b and c.
      std::int64_t a_off = 0, b_off = 0, c_off = 0, rest = t / tiled.parts;
      for (int d = batch_ndim - 1; d >= 0; --d) {
        const auto i = static_cast<std::size_t>(d);
        const std::int64_t index = rest % s.batch[i];
        rest /= s.batch[i];
        a_off += index * s.a_batch_stride[i];
        b_off += index * s.b_batch_stride[i];
        c_off += index * s.c_batch_stride[i];
      }
      Operand at = a, bt = b;
      Output ot = out;
      at.data = advance(a.data, a.dtype, a_off);
      bt.data = advance(b.data, b.dtype, b_off);
      ot.data = advance(out.data, out.dtype, c_off);
      std::int64_t m0, mm, n0, nn;
      tiled.region(t, m0, mm, n0, nn);
      gemm::gemmOut(at, bt, m0, mm, n0, nn, tiled.k, ot, Bias{}, scratch);
    }
  });
}

// ---- linear ----

void runLinear(const linear_args& args, int cores) {
  const TensorView &x = args.x, &w = args.weight, &y = args.y;
  const int last = x.ndim - 1;
  // x [..., in] as [rows, in]; weight^T as [in, out]; y [..., out] as [rows, out].
  const Operand a{x.data, x.dtype, Axis::ofDims(x, 0, last), Axis::strided(x.stride(last))};
  const Operand b{w.data, w.dtype, Axis::strided(w.stride(1)), Axis::strided(w.stride(0))};
  const Output out{y.data, y.dtype, Axis::ofDims(y, 0, last), Axis::strided(y.stride(last))};
  Bias bias;
  if (args.bias.present)
    bias = Bias{args.bias.data, args.bias.dtype, gemm_shapes::linearBiasStep(args.bias), false};
  TiledGemm tiled{1, w.dim(0), x.dim(last), 1};
  for (int d = 0; d < last; ++d) tiled.m *= x.dim(d);
  if (tiled.m == 0 || tiled.n == 0) return;
  tiled.plan(cores);
  runShares(tiled.tasks(), tiled.ways, [&](int, std::int64_t t0, std::int64_t t1) {
    gemm::Scratch scratch;
    for (std::int64_t t = t0; t < t1; ++t) {
      std::int64_t m0, mm, n0, nn;
      tiled.region(t, m0, mm, n0, nn);
      gemm::gemmOut(a, b, m0, mm, n0, nn, tiled.k, out, bias, scratch);
    }
  });
}

// ---- convolution ----

// The geometry of a validated convolution from its input-side shape and its filter shape.
ConvGeometry geometry(const ConvParams& p, const TensorView& input, const TensorView& filter) {
  return gemm_shapes::convGeometry(p, input.dim(0), input.dim(1), input.dim(2), input.dim(3), filter.dim(0),
                                   filter.dim(2), filter.dim(3));
}

// How a convolution kernel uses the workspace: `slots` cores, each with `floats_per_slot` float32 values;
// forward and backward data lower `images` images into one GEMM (see imagesPerGemm).
struct ConvPlan {
  int slots = 0;
  std::int64_t floats_per_slot = 0;
  std::int64_t images = 1;
  // Backward filter over the whole batch at once on this many cores (0: per-core partials).
  int whole_ways = 0;
  std::size_t bytes() const {
    return static_cast<std::size_t>(slots) * static_cast<std::size_t>(floats_per_slot) * sizeof(float);
  }
};

int slotsFor(std::int64_t tasks, int cores) {
  return tasks <= 0 ? 0 : static_cast<int>(std::min<std::int64_t>(std::max(cores, 1), tasks));
}

// One im2col matrix [C/g * kh * kw, Ho * Wo] per core (none for a pointwise convolution).
std::int64_t colFloats(const ConvGeometry& g) {
  return gemm_shapes::isPointwise(g) ? 0 : g.colRows() * g.outPixels();
}

// Output columns below which a GEMM wastes its micro-tiles and its packing: the late stages of a ResNet on
// small images have 2x2 or 4x4 outputs, a GEMM per image then has 4 or 16 columns of the kernel's 16.
constexpr std::int64_t kMinGemmColumns = 256;

// Images lowered into one GEMM by forward and backward data: enough for kMinGemmColumns output columns,
// but no fewer tasks than cores. Every output element is the same dot product over the same depth in the
// same order whatever the number of columns, so the results do not depend on it.
std::int64_t imagesPerGemm(const ConvGeometry& g, int cores) {
  const std::int64_t pixels = std::max<std::int64_t>(g.outPixels(), 1);
  const std::int64_t wanted = (kMinGemmColumns + pixels - 1) / pixels;
  const std::int64_t per_core = (g.n + std::max(cores, 1) - 1) / std::max(cores, 1);
  return std::max<std::int64_t>(1, std::min(wanted, per_core));
}

std::int64_t imageBatches(const ConvGeometry& g, std::int64_t images) { return (g.n + images - 1) / images; }

// Forward: tasks are (batch of images, group) pairs; each core needs an im2col matrix per image of a batch.
ConvPlan forwardPlan(const ConvGeometry& g, int cores) {
  const std::int64_t images = imagesPerGemm(g, cores);
  return {slotsFor(imageBatches(g, images) * g.groups, cores), colFloats(g) * images, images};
}
// Backward data: tasks are batches of images; each core needs a float32 image per image of a batch and
// one group's im2col-shaped gradient of them all.
ConvPlan backwardDataPlan(const ConvGeometry& g, int cores) {
  const std::int64_t images = imagesPerGemm(g, cores);
  return {slotsFor(imageBatches(g, images), cores), (colFloats(g) + g.c * g.h * g.w) * images, images};
}
// Backward filter: tasks are images; each core needs an im2col matrix and a float32 partial filter gradient.
// When those partials would outweigh the work (a large filter over few output pixels, as in a ResNet's late
// stages: Cout * cores > N * Ho * Wo), the whole batch is one GEMM instead: one im2col matrix of every image
// (lowered by all cores), and the cores split the filter gradient itself, each element summed over all the
// images' pixels in one order (whatever the number of cores), with no partials to write and add.
ConvPlan backwardFilterPlan(const ConvGeometry& g, int cores) {
  const std::int64_t images = imagesPerGemm(g, cores);
  const int slots = slotsFor(g.n, cores);
  if (g.groups == 1 && slots > 1 && g.cout * slots > g.n * g.outPixels()) {
    return {1, colFloats(g) * g.n, g.n, std::max(cores, 1)};
  }
  return {slots, colFloats(g) * images + g.cout * g.colRows(), images};
}

Status checkWorkspace(const Workspace& ws, const ConvPlan& plan) {
  if (ws.size < plan.bytes()) {
    return badParam("workspace of {} bytes is smaller than the {} bytes this convolution needs", ws.size,
                    plan.bytes());
  }
  if (plan.bytes() > 0 && reinterpret_cast<std::uintptr_t>(ws.data) % alignof(float) != 0) {
    return badParam("workspace = {} is not aligned to {} bytes", ws.data, alignof(float));
  }
  return Status::success();
}

void im2colAny(const TensorView& x, std::int64_t n, std::int64_t c0, const ConvGeometry& g, float* col) {
  dispatchFloating(x.dtype, [&]<typename T>() {
    gemm::im2col<T>(typed<T>(x) + n * x.stride(0), x.stride(1), x.stride(2), x.stride(3), g, c0, col);
  });
}

// Channels [c0, c0 + count) of images [n, n + images) of t ([N, C, H, W]) as a matrix
// [count, images * H * W], its columns (image, h, w).
Operand imageRows(const TensorView& t, std::int64_t n, std::int64_t c0, std::int64_t images = 1) {
  Axis cols;
  cols.append(images, t.stride(0));
  cols.append(t.dim(2), t.stride(2));
  cols.append(t.dim(3), t.stride(3));
  return {advance(t.data, t.dtype, n * t.stride(0) + c0 * t.stride(1)), t.dtype, Axis::strided(t.stride(1)),
          cols};
}

// The im2col matrices of `images` images, one after the other ([images][rows][pixels]), as one matrix
// [rows, images * pixels].
Axis colColumns(std::int64_t images, std::int64_t rows, std::int64_t pixels) {
  Axis cols;
  cols.append(images, rows * pixels);
  cols.append(pixels, 1);
  return cols;
}

void runConvForward(const conv2d_forward_args& args, const ConvGeometry& g, const ConvPlan& plan) {
  const TensorView &x = args.x, &w = args.w, &y = args.y;
  const std::int64_t cg = g.cinPerGroup(), coutg = g.coutPerGroup(), rows = g.colRows(),
                     pixels = g.outPixels();
  const bool pointwise = gemm_shapes::isPointwise(g);
  float* workspace = static_cast<float*>(args.workspace.data);
  const std::int64_t batches = imageBatches(g, plan.images);
  runShares(batches * g.groups, plan.slots, [&](int slot, std::int64_t t0, std::int64_t t1) {
    gemm::Scratch scratch;
    float* col = pointwise ? nullptr : workspace + slot * plan.floats_per_slot;
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t n = t / g.groups * plan.images, group = t % g.groups;
      const std::int64_t images = std::min(plan.images, g.n - n);
      // W_g as [Cout/g, C/g * kh * kw]
      const Operand a{advance(w.data, w.dtype, group * coutg * w.stride(0)), w.dtype,
                      Axis::strided(w.stride(0)), Axis::ofDims(w, 1, 4)};
      Operand b;
      if (pointwise) {
        b = imageRows(x, n, group * cg, images);
      } else {
        for (std::int64_t i = 0; i < images; ++i) im2colAny(x, n + i, group * cg, g, col + i * rows * pixels);
        b = Operand{col, MLUOP_DTYPE_FLOAT, Axis::strided(pixels), colColumns(images, rows, pixels)};
      }
      const Operand yg = imageRows(y, n, group * coutg, images);
      const Output out{const_cast<void*>(yg.data), y.dtype, yg.rows, yg.cols};
      Bias bias;
      if (args.bias.present) {
        bias = Bias{advance(args.bias.data, args.bias.dtype, group * coutg * args.bias.stride(0)),
                    args.bias.dtype, args.bias.stride(0), true};
      }
      gemm::gemmOut(a, b, 0, coutg, 0, images * pixels, rows, out, bias, scratch);
    }
  });
}

// Writes a float32 image [C, H, W] into image n of t, rounding once.
void storeImage(const float* image, const TensorView& t, std::int64_t n, const ConvGeometry& g) {
  dispatchFloating(t.dtype, [&]<typename T>() {
    T* base = typed<T>(t) + n * t.stride(0);
    for (std::int64_t c = 0; c < g.c; ++c) {
      for (std::int64_t h = 0; h < g.h; ++h) {
        T* line = base + c * t.stride(1) + h * t.stride(2);
        const float* src = image + (c * g.h + h) * g.w;
        for (std::int64_t col = 0; col < g.w; ++col) line[col * t.stride(3)] = store<T>(src[col]);
      }
    }
  });
}

void runConvBackwardData(const conv2d_backward_data_args& args, const ConvGeometry& g, const ConvPlan& plan) {
  const TensorView &gy = args.grad_output, &w = args.w;
  const std::int64_t cg = g.cinPerGroup(), coutg = g.coutPerGroup(), rows = g.colRows(),
                     pixels = g.outPixels();
  const bool pointwise = gemm_shapes::isPointwise(g);
  float* workspace = static_cast<float*>(args.workspace.data);
  const std::int64_t image_floats = g.c * g.h * g.w;
  runShares(imageBatches(g, plan.images), plan.slots, [&](int slot, std::int64_t b0, std::int64_t b1) {
    gemm::Scratch scratch;
    float* images_f32 = workspace + slot * plan.floats_per_slot;  // float32 images [images][C][H][W]
    float* col = images_f32 + plan.images * image_floats;
    for (std::int64_t batch = b0; batch < b1; ++batch) {
      const std::int64_t n0 = batch * plan.images, images = std::min(plan.images, g.n - n0);
      if (!pointwise) std::fill(images_f32, images_f32 + images * image_floats, 0.0f);
      for (std::int64_t group = 0; group < g.groups; ++group) {
        // W_g^T as [C/g * kh * kw, Cout/g], dy_g as [Cout/g, images * Ho * Wo]
        const Operand a{advance(w.data, w.dtype, group * coutg * w.stride(0)), w.dtype, Axis::ofDims(w, 1, 4),
                        Axis::strided(w.stride(0))};
        if (pointwise) {  // the column matrix is the image itself
          for (std::int64_t i = 0; i < images; ++i) {
            gemm::gemmFloat(a, imageRows(gy, n0 + i, group * coutg), 0, cg, 0, pixels, coutg,
                            Dest{images_f32 + i * image_floats + group * cg * pixels, pixels, 1}, false,
                            scratch);
          }
          continue;
        }
        // The images' column matrices side by side, [rows, images * pixels], then each added into its image.
        const Operand b = imageRows(gy, n0, group * coutg, images);
        gemm::gemmFloat(a, b, 0, rows, 0, images * pixels, coutg, Dest{col, images * pixels, 1}, false,
                        scratch);
        for (std::int64_t i = 0; i < images; ++i)
          gemm::col2im(col + i * pixels, g, group * cg, images_f32 + i * image_floats, images * pixels);
      }
      for (std::int64_t i = 0; i < images; ++i)
        storeImage(images_f32 + i * image_floats, args.grad_input, n0 + i, g);
    }
  });
}

void runConvBackwardFilter(const conv2d_backward_filter_args& args, const ConvGeometry& g,
                           const ConvPlan& plan) {
  const TensorView &x = args.x, &gy = args.grad_output, &gw = args.grad_w;
  const std::int64_t cg = g.cinPerGroup(), coutg = g.coutPerGroup(), rows = g.colRows(),
                     pixels = g.outPixels();
  const bool pointwise = gemm_shapes::isPointwise(g);
  float* workspace = static_cast<float*>(args.workspace.data);
  if (plan.whole_ways > 0) {
    // dy as [Cout, N * Ho * Wo] times col^T as [N * Ho * Wo, C * kh * kw], grad_w's columns split.
    float* col = workspace;
    Operand b;
    if (pointwise) {
      const Operand xg = imageRows(x, 0, 0, g.n);
      b = Operand{xg.data, xg.dtype, xg.cols, xg.rows};
    } else {
      parallelFor(g.n, 1, plan.whole_ways, [&](std::int64_t n0, std::int64_t n1) {
        for (std::int64_t n = n0; n < n1; ++n) im2colAny(x, n, 0, g, col + n * rows * pixels);
      });
      b = Operand{col, MLUOP_DTYPE_FLOAT, colColumns(g.n, rows, pixels), Axis::strided(pixels)};
    }
    const Operand a = imageRows(gy, 0, 0, g.n);
    const Output out{gw.data, gw.dtype, Axis::strided(gw.stride(0)), Axis::ofDims(gw, 1, 4)};
    const std::int64_t parts = std::min<std::int64_t>(plan.whole_ways, (rows + gemm::kNr - 1) / gemm::kNr);
    parallelFor(parts, 1, static_cast<int>(parts), [&](std::int64_t p0, std::int64_t p1) {
      gemm::Scratch scratch;
      for (std::int64_t part = p0; part < p1; ++part) {
        const auto [c0, cols] = splitAligned(rows, parts, part, gemm::kNr);
        gemm::gemmOut(a, b, 0, g.cout, c0, cols, g.n * pixels, out, Bias{}, scratch);
      }
    });
    return;
  }
  const std::int64_t partial_floats = g.cout * rows;
  runShares(g.n, plan.slots, [&](int slot, std::int64_t n0, std::int64_t n1) {
    gemm::Scratch scratch;
    float* partial = workspace + slot * plan.floats_per_slot;  // [Cout, C/g * kh * kw]
    float* col = partial + partial_floats;
    for (std::int64_t n = n0; n < n1; n += plan.images) {
      const std::int64_t images = std::min(plan.images, n1 - n);
      for (std::int64_t group = 0; group < g.groups; ++group) {
        // dy_g as [Cout/g, images * Ho * Wo], col_g^T as [images * Ho * Wo, C/g * kh * kw]: one GEMM as deep
        // as the images' output pixels together (a GEMM of depth 4 per image in a ResNet's last stage)
        const Operand a = imageRows(gy, n, group * coutg, images);
        Operand b;
        if (pointwise) {
          const Operand xg = imageRows(x, n, group * cg, images);
          b = Operand{xg.data, xg.dtype, xg.cols, xg.rows};
        } else {
          for (std::int64_t i = 0; i < images; ++i)
            im2colAny(x, n + i, group * cg, g, col + i * rows * pixels);
          b = Operand{col, MLUOP_DTYPE_FLOAT, colColumns(images, rows, pixels), Axis::strided(pixels)};
        }
        gemm::gemmFloat(a, b, 0, coutg, 0, rows, images * pixels,
                        Dest{partial + group * coutg * rows, rows, 1}, n > n0, scratch);
      }
    }
  });
  // Add the cores' partial sums in core order and round once into grad_w (rows of it split across cores:
  // each element's order stays the core order).
  dispatchFloating(gw.dtype, [&]<typename T>() {
    T* const dst = typed<T>(gw);
    const std::int64_t grain =
        std::max<std::int64_t>(1, (std::int64_t{1} << 14) / std::max<std::int64_t>(rows, 1));
    parallelFor(g.cout, grain, std::max(plan.slots, 1), [&](std::int64_t co0, std::int64_t co1) {
      for (std::int64_t co = co0; co < co1; ++co) {
        // (no slot: an empty batch, no workspace, and each sum is 0)
        const float* const part = plan.slots > 0 ? workspace + co * rows : nullptr;
        T* const out = dst + co * gw.stride(0);
        std::int64_t r = 0;
        for (std::int64_t ci = 0; ci < cg; ++ci) {
          for (std::int64_t i = 0; i < g.kh; ++i) {
            for (std::int64_t j = 0; j < g.kw; ++j, ++r) {
              float sum = 0.0f;
              for (int slot = 0; slot < plan.slots; ++slot) sum += part[slot * plan.floats_per_slot + r];
              out[ci * gw.stride(1) + i * gw.stride(2) + j * gw.stride(3)] = store<T>(sum);
            }
          }
        }
      }
    });
  });
}

void runConvBackwardBias(const conv2d_backward_bias_args& args, int cores) {
  const TensorView &gy = args.grad_output, &gb = args.grad_bias;
  const std::int64_t channels = gy.dim(1), plane = gy.dim(2) * gy.dim(3);
  const int ways = static_cast<double>(gy.numel()) < kParallelMacs ? 1 : cores;
  dispatchFloating(gb.dtype, [&]<typename T>() {
    runShares(channels, ways, [&](int, std::int64_t c0, std::int64_t c1) {
      const Axis pixels = Axis::ofDims(gy, 2, 4);
      for (std::int64_t co = c0; co < c1; ++co) {
        // Blocked float32 sum: blocks of up to 256 pixels summed, then combined.
        float total = 0.0f;
        for (std::int64_t n = 0; n < gy.dim(0); ++n) {
          const T* base = typed<T>(gy) + n * gy.stride(0) + co * gy.stride(1);
          for (std::int64_t p0 = 0; p0 < plane; p0 += 256) {
            float block = 0.0f;
            const std::int64_t p1 = std::min(plane, p0 + 256);
            if (pixels.simple()) {
              for (std::int64_t p = p0; p < p1; ++p) block += load<float>(base[p * pixels.stride()]);
            } else {
              for (std::int64_t p = p0; p < p1; ++p) block += load<float>(base[pixels.offset(p)]);
            }
            total += block;
          }
        }
        typed<T>(gb)[co * gb.stride(0)] = store<T>(total);
      }
    });
  });
}

}  // namespace

Status device(const Launch& launch, const matmul_args& args) {
  return launch.enqueue([args, cores = launch.cores()] { runMatmul(args, cores); });
}

Status device(const Launch& launch, const linear_args& args) {
  return launch.enqueue([args, cores = launch.cores()] { runLinear(args, cores); });
}

Status device(const Launch& launch, const conv2d_forward_args& args) {
  const ConvGeometry g = geometry(args.conv_desc, args.x, args.w);
  const ConvPlan plan = forwardPlan(g, launch.cores());
  MLU_RETURN_IF_ERROR(checkWorkspace(args.workspace, plan));
  return launch.enqueue([args, g, plan] { runConvForward(args, g, plan); });
}

Status device(const Launch& launch, const conv2d_backward_data_args& args) {
  const ConvGeometry g = geometry(args.conv_desc, args.grad_input, args.w);
  const ConvPlan plan = backwardDataPlan(g, launch.cores());
  MLU_RETURN_IF_ERROR(checkWorkspace(args.workspace, plan));
  return launch.enqueue([args, g, plan] { runConvBackwardData(args, g, plan); });
}

Status device(const Launch& launch, const conv2d_backward_filter_args& args) {
  const ConvGeometry g = geometry(args.conv_desc, args.x, args.grad_w);
  const ConvPlan plan = backwardFilterPlan(g, launch.cores());
  MLU_RETURN_IF_ERROR(checkWorkspace(args.workspace, plan));
  return launch.enqueue([args, g, plan] { runConvBackwardFilter(args, g, plan); });
}

Status device(const Launch& launch, const conv2d_backward_bias_args& args) {
  return launch.enqueue([args, cores = launch.cores()] { runConvBackwardBias(args, cores); });
}

namespace {

// ---- workspace-size queries ----

// A descriptor's tensor, for checking a workspace query's shapes with the op's own validate.
Status viewOf(const mluopTensorDescriptor_t desc, const char* name, TensorView* view) {
  if (desc == nullptr) return badParam("{} is NULL", name);
  if (!desc->set) return badParam("{} was never set (mluopSetTensorDescriptor)", name);
  *view = desc->view;
  view->data = nullptr;
  view->present = true;
  return Status::success();
}

// Runs a workspace query: checks handle, conv_desc and size, then body(cores, &bytes).
template <typename Body>
mluopStatus_t workspaceQuery(const char* function, mluopHandle_t handle,
                             const mluopConvolutionDescriptor_t conv, size_t* size, Body&& body) noexcept {
  try {
    if (handle == nullptr)
      return recordError(MLUOP_STATUS_NOT_INITIALIZED, fmt::format("{}: handle is NULL", function));
    Status s;
    if (conv == nullptr) {
      s = badParam("conv_desc is NULL");
    } else if (size == nullptr) {
      s = badParam("size is NULL");
    } else {
      std::size_t bytes = 0;
      s = body(std::max(1, handle->cores), conv->params, &bytes);
      if (s.ok()) *size = bytes;
    }
    if (!s.ok()) return recordError(s.code, fmt::format("{}: {}", function, s.message));
    return MLUOP_STATUS_SUCCESS;
  } catch (const std::bad_alloc&) {
    return recordError(MLUOP_STATUS_ALLOC_FAILED, fmt::format("{}: out of host memory", function));
  } catch (const std::exception& e) {
    return recordError(MLUOP_STATUS_INTERNAL_ERROR,
                       fmt::format("{}: internal error: {}", function, e.what()));
  }
}

}  // namespace
}  // namespace mlu

extern "C" {

MLUOP_API mluopStatus_t mluopGetConvolutionForwardWorkspaceSize(
    mluopHandle_t handle, const mluopConvolutionDescriptor_t conv_desc, const mluopTensorDescriptor_t x_desc,
    const mluopTensorDescriptor_t w_desc, const mluopTensorDescriptor_t y_desc, size_t* size) {
  return mlu::workspaceQuery("mluopGetConvolutionForwardWorkspaceSize", handle, conv_desc, size,
                             [&](int cores, const mlu::ConvParams& params, std::size_t* bytes) {
                               mlu::conv2d_forward_args args;
                               args.conv_desc = params;
                               MLU_RETURN_IF_ERROR(mlu::viewOf(x_desc, "x_desc", &args.x));
                               MLU_RETURN_IF_ERROR(mlu::viewOf(w_desc, "w_desc", &args.w));
                               MLU_RETURN_IF_ERROR(mlu::viewOf(y_desc, "y_desc", &args.y));
                               MLU_RETURN_IF_ERROR(mlu::validate(args));
                               *bytes =
                                   mlu::forwardPlan(mlu::geometry(params, args.x, args.w), cores).bytes();
                               return mlu::Status::success();
                             });
}

MLUOP_API mluopStatus_t mluopGetConvolutionBackwardDataWorkspaceSize(
    mluopHandle_t handle, const mluopConvolutionDescriptor_t conv_desc,
    const mluopTensorDescriptor_t grad_output_desc, const mluopTensorDescriptor_t w_desc,
    const mluopTensorDescriptor_t grad_input_desc, size_t* size) {
  return mlu::workspaceQuery(
      "mluopGetConvolutionBackwardDataWorkspaceSize", handle, conv_desc, size,
      [&](int cores, const mlu::ConvParams& params, std::size_t* bytes) {
        mlu::conv2d_backward_data_args args;
        args.conv_desc = params;
        MLU_RETURN_IF_ERROR(mlu::viewOf(grad_output_desc, "grad_output_desc", &args.grad_output));
        MLU_RETURN_IF_ERROR(mlu::viewOf(w_desc, "w_desc", &args.w));
        MLU_RETURN_IF_ERROR(mlu::viewOf(grad_input_desc, "grad_input_desc", &args.grad_input));
        MLU_RETURN_IF_ERROR(mlu::validate(args));
        *bytes = mlu::backwardDataPlan(mlu::geometry(params, args.grad_input, args.w), cores).bytes();
        return mlu::Status::success();
      });
}

MLUOP_API mluopStatus_t mluopGetConvolutionBackwardFilterWorkspaceSize(
    mluopHandle_t handle, const mluopConvolutionDescriptor_t conv_desc, const mluopTensorDescriptor_t x_desc,
    const mluopTensorDescriptor_t grad_output_desc, const mluopTensorDescriptor_t grad_w_desc, size_t* size) {
  return mlu::workspaceQuery(
      "mluopGetConvolutionBackwardFilterWorkspaceSize", handle, conv_desc, size,
      [&](int cores, const mlu::ConvParams& params, std::size_t* bytes) {
        mlu::conv2d_backward_filter_args args;
        args.conv_desc = params;
        MLU_RETURN_IF_ERROR(mlu::viewOf(x_desc, "x_desc", &args.x));
        MLU_RETURN_IF_ERROR(mlu::viewOf(grad_output_desc, "grad_output_desc", &args.grad_output));
        MLU_RETURN_IF_ERROR(mlu::viewOf(grad_w_desc, "grad_w_desc", &args.grad_w));
        MLU_RETURN_IF_ERROR(mlu::validate(args));
        *bytes = mlu::backwardFilterPlan(mlu::geometry(params, args.x, args.grad_w), cores).bytes();
        return mlu::Status::success();
      });
}

}  // extern "C"
