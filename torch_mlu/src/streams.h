// streams.h — PyTorch streams on the simulated MLU, each an MLU queue: stream 0 of a device is its default
// queue (the one mlurtMemcpy is ordered with), streams 1..kStreamPoolSize are queues of torch_mlu's own,
// made on first use and kept for the life of the process, handed out round-robin as CUDA's stream pool
// hands out its streams (torch.mlu.Stream() takes the next). The current stream is per thread and device,
// as in PyTorch: kernels, copies and allocations go to it.
#pragma once

#include <c10/core/Stream.h>
#include <mlu/mlurt.h>

namespace torch_mlu {

inline constexpr c10::StreamId kStreamPoolSize = 8;

// Devices are indexes as PyTorch gives them (-1: the current device).
// The queue of stream `id` of `device` (0: the default queue). Throws PyTorch's error for an id outside
// [0, kStreamPoolSize].
mlurtQueue_t queueOf(int device, c10::StreamId id);

// The calling thread's current stream of a device (0 until set), and setting it (returns the previous).
c10::StreamId currentStreamId(int device);
c10::StreamId exchangeStreamId(int device, c10::StreamId id);

// The next stream of the pool of a device (1, 2, ..., kStreamPoolSize, 1, ...).
c10::StreamId nextPoolStream(int device);

// The current stream's queue on the current device.
mlurtQueue_t currentQueue();

// Whether a stream has run everything queued on it, and waiting until it has (the device guard's and
// torch.mlu.Stream's query and synchronize).
bool streamIdle(int device, c10::StreamId id);
void synchronizeStream(int device, c10::StreamId id);

}  // namespace torch_mlu
