// XXH3-64 built for AVX2 (compiled with -mavx2, core/CMakeLists.txt), from the Debian libxxhash-dev header's
// inline implementation: stats.cpp calls it where the CPU has AVX2. Not libxxhash's own runtime dispatch,
// which picks AVX-512 on CPUs that have it: measured on llama_train's 3.6 GB of tensors, its AVX-512 loop
// slowed the device kernels running after it on the same core (the clock drops for AVX-512) so much that
// checksums alone cost 1.45x against 1.2x with the SSE2 build. The same hash whatever the build.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace opscope::rundb {

std::uint64_t checksumAvx2(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace opscope::rundb
