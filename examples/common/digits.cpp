#include "digits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

namespace examples {
namespace {

struct Point {
  float x, y;
};

// Each digit is a few strokes (polylines) in a unit box, x to the right and y down, as a hand draws it.
using Stroke = std::vector<Point>;

std::vector<Stroke> arc(float cx, float cy, float rx, float ry, float from_deg, float to_deg,
                        int steps = 14) {
  Stroke s;
  for (int i = 0; i <= steps; ++i) {
    const float t = (from_deg + (to_deg - from_deg) * static_cast<float>(i) / static_cast<float>(steps)) *
                    3.14159265f / 180.0f;
    s.push_back({cx + rx * std::cos(t), cy + ry * std::sin(t)});
  }
  return {s};
}

std::vector<Stroke> glyph(int digit) {
  auto join = [](std::vector<Stroke> a, const std::vector<Stroke>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  switch (digit) {
    case 0:
      return arc(0.5f, 0.5f, 0.28f, 0.4f, 0, 360, 24);
    case 1:
      return {{{0.35f, 0.25f}, {0.55f, 0.1f}, {0.55f, 0.9f}}};
    case 2:
      return join(arc(0.5f, 0.32f, 0.25f, 0.22f, 200, 380), {{{0.74f, 0.4f}, {0.25f, 0.9f}, {0.78f, 0.9f}}});
    case 3:
      return join(arc(0.48f, 0.3f, 0.24f, 0.2f, 200, 450), arc(0.48f, 0.7f, 0.27f, 0.2f, 270, 520));
    case 4:
      return {{{0.65f, 0.9f}, {0.65f, 0.1f}, {0.2f, 0.65f}, {0.8f, 0.65f}}};
    case 5:
      return join({{{0.75f, 0.1f}, {0.3f, 0.1f}, {0.27f, 0.45f}}}, arc(0.48f, 0.65f, 0.27f, 0.25f, 220, 500));
    case 6:
      return join(arc(0.5f, 0.68f, 0.24f, 0.22f, 0, 360, 20),
                  {{{0.28f, 0.66f}, {0.4f, 0.3f}, {0.65f, 0.08f}}});
    case 7:
      return {{{0.22f, 0.12f}, {0.78f, 0.12f}, {0.42f, 0.9f}}};
    case 8:
      return join(arc(0.5f, 0.3f, 0.2f, 0.19f, 0, 360, 18), arc(0.5f, 0.7f, 0.25f, 0.21f, 0, 360, 20));
    default:
      return join(arc(0.5f, 0.32f, 0.23f, 0.21f, 0, 360, 20),
                  {{{0.73f, 0.34f}, {0.66f, 0.65f}, {0.55f, 0.92f}}});
  }
}

// Distance from p to the segment ab.
float segmentDistance(Point p, Point a, Point b) {
  const float vx = b.x - a.x, vy = b.y - a.y;
  const float wx = p.x - a.x, wy = p.y - a.y;
  const float len2 = vx * vx + vy * vy;
  const float t = len2 > 0 ? std::clamp((wx * vx + wy * vy) / len2, 0.0f, 1.0f) : 0.0f;
  const float dx = wx - t * vx, dy = wy - t * vy;
  return std::sqrt(dx * dx + dy * dy);
}

}  // namespace

int DigitDataset::render(std::int64_t index, float* pixels) const {
  // One generator per image, seeded by the split and the index: any image can be made on its own.
  std::seed_seq seq{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32),
                    static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32)};
  std::mt19937 gen(seq);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const int label = static_cast<int>(gen() % 10);

  const float scale = 17.0f + 5.0f * u(gen);  // glyph height in pixels
  const float aspect = 0.8f + 0.35f * u(gen);
  const float angle = (u(gen) - 0.5f) * 0.5f;  // about +-14 degrees
  const float slant = (u(gen) - 0.5f) * 0.5f;
  const float cx = 14.0f + (u(gen) - 0.5f) * 5.0f;
  const float cy = 14.0f + (u(gen) - 0.5f) * 5.0f;
  const float width = 0.9f + 0.9f * u(gen);  // stroke half-width in pixels
  const float c = std::cos(angle), s = std::sin(angle);

  // Strokes in pixel coordinates, each point jittered a little, as a hand would.
  std::vector<Stroke> strokes = glyph(label);
  std::normal_distribution<float> jitter(0.0f, 0.02f);
  for (Stroke& stroke : strokes) {
    for (Point& p : stroke) {
      const float x = (p.x - 0.5f + jitter(gen)) * scale * aspect;
      const float y = (p.y - 0.5f + jitter(gen)) * scale;
      const float xs = x + slant * y;
      p = {cx + c * xs - s * y, cy + s * xs + c * y};
    }
  }

  std::normal_distribution<float> noise(0.0f, 0.08f);
  for (int py = 0; py < kDigitSide; ++py) {
    for (int px = 0; px < kDigitSide; ++px) {
      const Point p{static_cast<float>(px) + 0.5f, static_cast<float>(py) + 0.5f};
      float d = 1e9f;
      for (const Stroke& stroke : strokes) {
        for (std::size_t k = 1; k < stroke.size(); ++k)
          d = std::min(d, segmentDistance(p, stroke[k - 1], stroke[k]));
      }
      const float ink = std::clamp(width + 0.5f - d, 0.0f, 1.0f);  // anti-aliased edge
      pixels[py * kDigitSide + px] = std::clamp(ink + noise(gen), 0.0f, 1.0f);
    }
  }
  return label;
}

DigitBatch DigitDataset::batch(std::int64_t first, std::int64_t count) const {
  // torchvision's MNIST normalization: (x - 0.1307) / 0.3081.
  constexpr float kMean = 0.1307f, kStd = 0.3081f;
  DigitBatch b;
  b.images.resize(static_cast<std::size_t>(count * kDigitPixels));
  b.labels.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    float* px = b.images.data() + i * kDigitPixels;
    b.labels[static_cast<std::size_t>(i)] = render((first + i) % size_, px);
    for (int k = 0; k < kDigitPixels; ++k) px[k] = (px[k] - kMean) / kStd;
  }
  return b;
}

}  // namespace examples
