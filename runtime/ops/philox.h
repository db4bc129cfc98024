// philox.h — the Philox4x32-10 counter-based generator (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11; the Random123 library) and the exact mapping from (seed, offset, element index) to
// random numbers that the random ops use. Header-only: the device kernels and the CPU reference both use
// it, so they draw bit-identical random words and differ only in the arithmetic done on them.
//
// The mapping (every random op, on the device and in the reference):
//   key     = {seed & 0xffffffff, seed >> 32}
//   block c = offset + i / 4 for element i (in row-major order of the output's logical shape), encrypted
//             from the counter {c & 0xffffffff, c >> 32, 0, 0}; element i uses word i % 4 of it.
//   uniform u = (word >> 8) * 2^-24, in [0, 1) (exactly representable in float32).
//   dropout_forward: mask = (u >= p), y = x * mask / (1 - p) (y = 0 when p == 1).
//   uniform op: y = low + (high - low) * u.
//   normal op (Box-Muller, one normal per pair of words): element i uses block c = offset + i / 2 and
//             its words w0 = word 2 * (i % 2), w1 = word 2 * (i % 2) + 1; with
//             u1 = ((w0 >> 8) + 1) * 2^-24 in (0, 1]  (never 0, so the log is finite) and
//             u2 = (w1 >> 8) * 2^-24 in [0, 1),
//             z = sqrt(-2 ln u1) * cos(2 pi u2) and y = mean + std * z.
// A caller that wants fresh numbers for its next call advances offset by the blocks used: ceil(n / 4)
// for dropout and uniform, ceil(n / 2) for normal.
#pragma once

#include <array>
#include <cstdint>

namespace mlu::philox {

using Counter = std::array<std::uint32_t, 4>;
using Key = std::array<std::uint32_t, 2>;

inline constexpr std::uint32_t kMul0 = 0xD2511F53u;  // round multipliers
inline constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;  // key schedule increments (golden ratio, sqrt(3)-1)
inline constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;

// Philox4x32 with 10 rounds: encrypts counter under key.
constexpr Counter philox4x32_10(Counter ctr, Key key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped before every round but the first
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const std::uint64_t p0 = std::uint64_t{kMul0} * ctr[0];
    const std::uint64_t p1 = std::uint64_t{kMul1} * ctr[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

constexpr Key keyOf(std::uint64_t seed) {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
}

// The four random words of block `block` (counter {block low, block high, 0, 0}).
constexpr Counter block(std::uint64_t seed, std::uint64_t block) {
  return philox4x32_10({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0, 0},
                       keyOf(seed));
}

// A word as a uniform number in [0, 1): its top 24 bits times 2^-24 (exact in float and double).
constexpr double uniformOf(std::uint32_t word) { return static_cast<double>(word >> 8) * 0x1p-24; }
constexpr float uniformOfFloat(std::uint32_t word) { return static_cast<float>(word >> 8) * 0x1p-24f; }

// The Box-Muller u1 in (0, 1]: (top 24 bits + 1) * 2^-24 (exact in float and double).
constexpr double boxMullerU1(std::uint32_t word) { return static_cast<double>((word >> 8) + 1) * 0x1p-24; }
constexpr float boxMullerU1Float(std::uint32_t word) {
  return static_cast<float>((word >> 8) + 1) * 0x1p-24f;
}

// The Philox block and word index of element i for the uniform-style ops (dropout, uniform).
constexpr std::uint64_t uniformBlock(std::uint64_t offset, std::uint64_t i) { return offset + i / 4; }
constexpr int uniformWord(std::uint64_t i) { return static_cast<int>(i % 4); }
// The block and first word (of the pair) of element i for the normal op.
constexpr std::uint64_t normalBlock(std::uint64_t offset, std::uint64_t i) { return offset + i / 2; }
constexpr int normalWord(std::uint64_t i) { return static_cast<int>(2 * (i % 2)); }

// Known-answer vectors of Random123 (tests/kat_vectors), checked at compile time.
static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0}) == Counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
static_assert(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
              Counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
static_assert(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
              Counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});

}  // namespace mlu::philox
