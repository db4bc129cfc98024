// digits.h — a deterministic, generated stand-in for MNIST: 28x28 grey images of the digits 0-9, drawn
// as pen strokes with a random pose (shift, scale, rotation, slant), stroke width and pixel noise, so that a
// model must learn the shapes, not a fixed pattern. Image i of a split is the same on every run.
#pragma once

#include <cstdint>
#include <vector>

namespace examples {

inline constexpr int kDigitSide = 28;
inline constexpr int kDigitPixels = kDigitSide * kDigitSide;

struct DigitBatch {
  std::vector<float> images;         // [count, 1, 28, 28], normalized like torchvision's MNIST transform
  std::vector<std::int64_t> labels;  // [count]
};

class DigitDataset {
 public:
  // A split of `size` images; `seed` selects the split (train and test use different seeds).
  DigitDataset(std::int64_t size, std::uint64_t seed) : size_(size), seed_(seed) {}

  std::int64_t size() const { return size_; }
  // Images first .. first+count-1 (wrapping around the split).
  DigitBatch batch(std::int64_t first, std::int64_t count) const;
  // One image (28*28 values in [0, 1]) and its label.
  int render(std::int64_t index, float* pixels) const;

 private:
  std::int64_t size_;
  std::uint64_t seed_;
};

}  // namespace examples
