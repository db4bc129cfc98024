// caching_allocator.h — device memory for tensors, as PyTorch's CUDA caching allocator gives it: blocks
// ("segments") from mlurtMalloc are split into pieces, a freed piece is merged with its free neighbours and
// kept for the next request, and nothing goes back to the runtime until empty_cache() (or a failed
// mlurtMalloc, which empties the cache and tries again). A tensor's free then costs no mlurtFree, which
// waits for the device.
//
// Streams (streams.h) are kept apart as in the CUDA allocator: a segment belongs to the stream it was
// allocated on and its pieces serve only that stream, so that a piece freed is safe to hand out again at
// once — the work of its old owner is queued before any work of its new one. A piece also used on other
// streams (record_stream) waits, when freed, for a notifier placed on each of them.
//
// Under opscope each piece is announced to memcheck (opscope.h's opscope_pool_alloc / _free), with the red
// zone memcheck asks for (opscope_pool_padding) left after it: leaks and overflows are found per tensor, and
// the segments are not leaks. PYTORCH_NO_MLU_MEMORY_CACHING=1 turns the cache off (one mlurtMalloc and one
// mlurtFree per tensor, as PYTORCH_NO_CUDA_MEMORY_CACHING does for CUDA).
#pragma once

#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>

namespace torch_mlu {

inline constexpr std::size_t kPieceAlignment = 512;               // every piece's size is a multiple
inline constexpr std::size_t kSmallPiece = std::size_t{1} << 20;  // up to 1 MiB: from the small segments
inline constexpr std::size_t kSmallSegment = std::size_t{2} << 20;
inline constexpr std::size_t kLargeSegment = std::size_t{20} << 20;  // for pieces of 1 to 10 MiB
inline constexpr std::size_t kLargePieceSplit = kSmallPiece;  // a large piece is split when this much is left

// The size of the piece for a request of `bytes` with `padding` bytes after it (rounded up to 512).
std::size_t pieceSize(std::size_t bytes, std::size_t padding);
// The segment to allocate for a piece of `piece` bytes: 2 MiB for small pieces, 20 MiB for pieces under
// 10 MiB, else the piece rounded up to 2 MiB.
std::size_t segmentSize(std::size_t piece);

// Device memory of the calling thread's current device for `bytes` (> 0); throws PyTorch's error when the
// device has no room even with the cache emptied.
void* allocateDeviceMemory(std::size_t bytes, int device);
// Gives a pointer from allocateDeviceMemory back (to the cache, or to the runtime with the cache off).
void freeDeviceMemory(void* ptr);
// The memory at ptr (from allocateDeviceMemory on `device`) is used on `stream` too: when freed, it is not
// handed out again until that stream has run what it was given so far (Tensor.record_stream).
void recordStream(void* ptr, int device, c10::StreamId stream);
// Returns the cached segments that hold no piece to the runtime, on every device (after waiting for the
// streams freed pieces were used on).
void emptyCache();

struct MemoryStats {
  std::uint64_t allocated = 0;  // bytes of the pieces handed out (their rounded sizes)
  std::uint64_t reserved = 0;   // bytes of the segments held
  std::uint64_t peak_allocated = 0;
  std::uint64_t segments = 0;
};
MemoryStats memoryStats(int device);
bool cachingEnabled();
// Whether the process has allocated device memory (a program that never used the device says nothing at
// exit).
bool deviceUsed();

}  // namespace torch_mlu
