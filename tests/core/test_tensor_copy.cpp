// The copies tools keep of tensors (opscope/tensor_snapshot.h): the streaming copy against the bytes it was
// given, at every alignment of source and destination and around its size thresholds; a contiguous tensor
// packed with either kind of stores; and bytesOverlap's hand-worked cases.
#include <opscope/bytes.h>
#include <opscope/tensor_snapshot.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace opscope {
namespace {

TEST(CopyStreaming, CopiesEveryByteAtEveryAlignmentAndTouchesNothingElse) {
  for (const std::size_t n :
       {0UL, 1UL, 63UL, 4095UL, 4096UL, 4097UL, 4096UL + 63, 65'536UL + 13, 200'003UL}) {
    for (std::size_t src_off = 0; src_off < 18; src_off += 5) {
      for (std::size_t dst_off = 0; dst_off < 18; ++dst_off) {
        std::vector<std::uint8_t> src(n + 32), dst(n + 64, 0xAB);
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 131 + 7);
        copyStreaming(dst.data() + dst_off, src.data() + src_off, n);
        for (std::size_t i = 0; i < dst_off; ++i) ASSERT_EQ(dst[i], 0xAB) << n << " " << dst_off << " " << i;
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(dst[dst_off + i], src[src_off + i])
              << "n " << n << " src+" << src_off << " dst+" << dst_off << " byte " << i;
        for (std::size_t i = dst_off + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << n << " " << i;
      }
    }
  }
}

TEST(CopyStreaming, PackTensorGivesTheSameBytesWithEitherStores) {
  std::vector<float> data(50'000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f - 3.0f;
  mlu::TensorView v;
  v.dtype = MLUOP_DTYPE_FLOAT;
  v.ndim = 2;
  v.dims[0] = 250;
  v.dims[1] = 200;
  v.strides[0] = 200;
  v.strides[1] = 1;
  v.data = data.data();
  v.present = true;
  const Bytes cached = packTensor(v, v.data, {}, CopyStores::kCached);
  const Bytes streamed = packTensor(v, v.data, {}, CopyStores::kStreaming);
  ASSERT_EQ(cached.size(), data.size() * sizeof(float));
  ASSERT_EQ(streamed.size(), cached.size());
  EXPECT_EQ(std::memcmp(streamed.data(), data.data(), streamed.size()), 0);
  EXPECT_EQ(std::memcmp(cached.data(), data.data(), cached.size()), 0);
}

TEST(BytesOverlap, HandWorkedCases) {
  alignas(16) char b[64];
  EXPECT_TRUE(bytesOverlap(b, 10, b + 9, 1));    // the last byte
  EXPECT_FALSE(bytesOverlap(b, 10, b + 10, 5));  // adjacent
  EXPECT_FALSE(bytesOverlap(b + 10, 5, b, 10));
  EXPECT_TRUE(bytesOverlap(b, 64, b + 20, 4));  // inside
  EXPECT_TRUE(bytesOverlap(b + 20, 4, b, 64));
  EXPECT_FALSE(bytesOverlap(b, 0, b, 10));  // empty ranges share nothing
  EXPECT_FALSE(bytesOverlap(b, 10, b, 0));
  EXPECT_TRUE(bytesOverlap(b, 1, b, 1));
}

}  // namespace
}  // namespace opscope
