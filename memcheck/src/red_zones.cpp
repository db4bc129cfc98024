#include "red_zones.h"

#include <opscope/own_memory.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace opscope::memcheck {

std::size_t frontRedZone(std::size_t configured) {
  return (configured + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

namespace {

// How far writes went into a block's zones: bytes from the furthest one before the start, and one past the
// furthest after the end (0: none).
std::pair<std::size_t, std::size_t> reach(const unsigned char* front_zone, std::size_t front,
                                          const unsigned char* back_zone, std::size_t back) {
  std::size_t before = 0;
  for (std::size_t j = 0; j < front; ++j) {
    if (front_zone[j] != kRedZoneByte) {
      before = front - j;
      break;
    }
  }
  std::size_t past = 0;
  for (std::size_t j = back; j > 0; --j) {
    if (back_zone[j - 1] != kRedZoneByte) {
      past = j;
      break;
    }
  }
  return {before, past};
}

}  // namespace

std::string redZoneDamage(const unsigned char* zones, std::size_t front, std::size_t back, std::size_t size) {
  const auto [before, past] = reach(zones, front, zones + front, back);
  return redZoneDamage(before, past, size);
}

std::string redZoneDamage(std::size_t before, std::size_t past, std::size_t size) {
  std::string damage;
  if (past > 0)
    damage = fmt::format("{} byte{} past the end of a {}-byte allocation", past, past == 1 ? "" : "s", size);
  if (before > 0) {
    if (!damage.empty()) damage += " and ";
    damage += fmt::format("{} byte{} before the start of a {}-byte allocation", before,
                          before == 1 ? "" : "s", size);
  }
  return damage;
}

std::vector<Quarantined> Quarantine::hold(const Quarantined& block) {
  const LiveAllocation& a = block.allocation;
  insertReusing(blocks_, spare_, a.ptr, block);
  order_.push_back(a.ptr);
  bytes_ += a.front + a.size + a.back;
  std::vector<Quarantined> out;
  if (bytes_ <= cap_) return out;
  while (bytes_ > cap_ / 4 * 3 && !order_.empty()) {
    const auto it = blocks_.find(order_.front());
    order_.pop_front();
    if (it == blocks_.end()) continue;
    const LiveAllocation& old = it->second.allocation;
    bytes_ -= old.front + old.size + old.back;
    out.push_back(it->second);
    spare_.push_back(blocks_.extract(it));
  }
  return out;
}

const Quarantined* Quarantine::containing(std::uintptr_t ptr) const {
  auto it = blocks_.upper_bound(ptr);
  if (it == blocks_.begin()) return nullptr;
  --it;
  const LiveAllocation& a = it->second.allocation;
  return ptr >= a.ptr && ptr < a.ptr + std::max<std::size_t>(a.size, 1) ? &it->second : nullptr;
}

std::vector<Quarantined> Quarantine::all() const {
  std::vector<Quarantined> out;
  out.reserve(blocks_.size());
  for (const auto& [ptr, q] : blocks_) out.push_back(q);
  return out;
}

std::vector<Quarantined> Quarantine::releaseAll() {
  std::vector<Quarantined> out = all();
  for (auto it = blocks_.begin(); it != blocks_.end();) spare_.push_back(blocks_.extract(it++));
  order_.clear();
  bytes_ = 0;
  return out;
}

int Runtime::currentDevice() const {
  int device = 0;
  if (get_device == nullptr || get_device(&device) != MLURT_SUCCESS) return 0;
  return device;
}

std::uint64_t Runtime::queueId(mlurtQueue_t queue) const {
  std::uint64_t id = 0;
  if (queue_get_id == nullptr || queue_get_id(queue, &id) != MLURT_SUCCESS)
    return reinterpret_cast<std::uintptr_t>(queue);
  return id;
}

namespace {

// memcheck's kernels. They run on the device (its queue's worker), on device memory only.
struct PaintArgs {
  std::vector<RedZones::Span> zones;
};
mlurtStatus_t paintKernel(void* args) {
  for (const RedZones::Span& z : static_cast<PaintArgs*>(args)->zones)
    std::memset(z.data, kRedZoneByte, z.bytes);
  return MLURT_SUCCESS;
}

bool intact(const RedZones::Span& z) {
  constexpr std::uint64_t kPainted = 0x0101010101010101ull * kRedZoneByte;
  std::size_t i = 0;
  for (; i + sizeof kPainted <= z.bytes; i += sizeof kPainted) {
    std::uint64_t word;
    std::memcpy(&word, z.data + i, sizeof word);
    if (word != kPainted) return false;
  }
  for (; i < z.bytes; ++i) {
    if (z.data[i] != kRedZoneByte) return false;
  }
  return true;
}

struct CheckArgs {
  std::vector<RedZones::Span> zones;  // two per block: front, back
  unsigned char* flags = nullptr;     // device memory: one byte per block, 1 when a zone changed
};
mlurtStatus_t checkKernel(void* args) {
  const auto& a = *static_cast<CheckArgs*>(args);
  for (std::size_t i = 0; i < a.zones.size() / 2; ++i) {
    a.flags[i] = intact(a.zones[2 * i]) && intact(a.zones[2 * i + 1]) ? 0 : 1;
  }
  return MLURT_SUCCESS;
}

// checkOn()'s kernel: per block, how far its zones were written (reach(): before, past), into device memory.
mlurtStatus_t reachKernel(void* args) {
  const auto& a = *static_cast<RedZones::ReachArgs*>(args);
  struct PaintAfter {
    const RedZones::ReachArgs& a;
    ~PaintAfter() {
      for (const RedZones::Span& z : a.paint) std::memset(z.data, kRedZoneByte, z.bytes);
      if (a.progress) a.progress->done.store(a.seq, std::memory_order_release);
    }
  } paint_after{a};
  const auto unpainted = [&](std::size_t zone) {
    return std::any_of(a.after.begin(), a.after.end(), [&](const RedZones::ReachArgs::After& w) {
      return zone >= w.from && zone < w.to && w.progress->done.load(std::memory_order_acquire) < w.seq;
    });
  };
  for (std::size_t i = 0; i < a.zones.size() / 2; ++i) {
    const RedZones::Span& f = a.zones[2 * i];
    const RedZones::Span& b = a.zones[2 * i + 1];
    const bool ok = (!a.after.empty() && unpainted(2 * i)) || (intact(f) && intact(b));
    const auto [before, past] =
        ok ? std::pair<std::size_t, std::size_t>{0, 0} : reach(f.data, f.bytes, b.data, b.bytes);
    a.found[2 * i] = before;
    a.found[2 * i + 1] = past;
  }
  return MLURT_SUCCESS;
}

// The runtime owns a kernel's args from the launch on and hands them back here.
template <typename Args>
void deleteArgs(void* args) {
  std::unique_ptr<Args> owned(static_cast<Args*>(args));
}

}  // namespace

mlurtStatus_t RedZones::allocate(std::size_t size, void** user) {
  const int device = rt_.currentDevice();
  void* block = nullptr;
  const mlurtStatus_t status = rt_.malloc(&block, front_ + size + back_);
  if (status != MLURT_SUCCESS) return status;
  auto* base = static_cast<unsigned char*>(block);
  std::unique_lock lock(mutex_);
  Device* d = deviceLocked(device);
  if (d == nullptr) {  // no queue of memcheck's own to paint with
    lock.unlock();
    rt_.free(block);
    return MLURT_ERROR_INTERNAL;
  }
  addOwnDeviceBytes(device, counted(front_ + size + back_) - counted(size));  // the zones
  if (front_ > 0) d->unpainted.push_back({base, front_});
  if (back_ > 0) d->unpainted.push_back({base + front_ + size, back_});
  paint_pending_.store(true, std::memory_order_release);
  if (d->unpainted.size() >= kMaxUnpaintedZones) paintLocked(*d);
  *user = base + front_;
  return MLURT_SUCCESS;
}

void RedZones::release(const LiveAllocation& a) {
  auto* base = reinterpret_cast<unsigned char*>(a.ptr) - a.front;
  {
    // Zones still to be painted are painted first: mlurtFree then waits for that kernel, and the paint
    // cannot land in memory the runtime has handed out again.
    std::lock_guard lock(mutex_);
    if (Device* d = deviceLocked(a.device); d != nullptr && !d->unpainted.empty()) paintLocked(*d);
  }
  if (rt_.free(base) == MLURT_SUCCESS) addOwnDeviceBytes(a.device, -counted(a.front + a.size + a.back));
}

void RedZones::paintLocked(Device& d) {
  if (d.unpainted.empty()) return;
  auto args = std::make_unique<PaintArgs>();
  args->zones.swap(d.unpainted);
  d.unpainted.reserve(args->zones.size());
  // The runtime owns the args from here on (and deletes them at once when the launch fails).
  if (rt_.launch_kernel(d.queue, "opscope_memcheck_paint_red_zones", paintKernel, args.release(),
                        deleteArgs<PaintArgs>, nullptr) != MLURT_SUCCESS) {
    d.unreliable = true;
  }
}

void RedZones::queuePaint(int device, Span zone) {
  std::lock_guard lock(mutex_);
  if (Device* d = deviceLocked(device)) {
    d->unpainted.push_back(zone);
    paint_pending_.store(true, std::memory_order_release);
  }
}

void RedZones::settle() {
  if (!paint_pending_.exchange(false, std::memory_order_acq_rel)) return;
  std::set<int> drain;  // devices with a program allocator's piece to paint (see paint())
  {
    std::lock_guard lock(mutex_);
    // The checks waiting on the program's queues read zones of blocks a piece painted now may overlap
    // (handed out again): they go first, and the wait below covers them.
    for (auto& [q, f] : findings_) launchPendingLocked(q, f);
    for (auto& [device, d] : devices_) {
      if (d.drain) drain.insert(device);
      d.drain = false;
    }
  }
  if (!drain.empty()) waitForDevices(drain);
  std::vector<mlurtQueue_t> queues;
  {
    std::lock_guard lock(mutex_);
    for (auto& [device, d] : devices_) {
      if (d.queue == nullptr) continue;
      paintLocked(d);
      queues.push_back(d.queue);
    }
  }
  for (mlurtQueue_t queue : queues) rt_.queue_sync(queue);
}

bool RedZones::settleOn(mlurtQueue_t queue, int device, bool single_queue) {
  if (!paint_pending_.load(std::memory_order_acquire)) return true;
  std::lock_guard lock(mutex_);
  for (const auto& [other, d] : devices_) {
    if (!d.unpainted.empty() && (other != device || (d.drain && !single_queue))) return false;
  }
  const auto it = devices_.find(device);
  if (it != devices_.end() && !it->second.unpainted.empty()) {
    Device& d = it->second;
    // The checks waiting on other queues (or on other handles of this queue: a program may name its default
    // queue by a handle and by nullptr) go first: each reads zones as its op left them, before a piece
    // painted now may take their memory.
    for (auto& [q, other] : findings_) {
      if (q != queue) launchPendingLocked(q, other);
    }
    // One kernel: the checks queued on this queue since the last one, then the paint.
    Findings& f = findings_[queue];
    if (!f.pending) f.pending = std::make_unique<ReachArgs>();
    f.pending->paint.swap(d.unpainted);
    d.unpainted.reserve(f.pending->paint.size());
    if (!launchPendingLocked(queue, f)) d.unreliable = true;
    d.drain = false;
  }
  paint_pending_.store(false, std::memory_order_release);
  return true;
}

// Requires mutex_: launches the kernel of the checks (and paint) waiting on queue; false when it could not.
bool RedZones::launchPendingLocked(mlurtQueue_t queue, Findings& f) {
  if (!f.pending) return true;
  std::unique_ptr<ReachArgs> args = std::move(f.pending);
  const bool checks = !args->zones.empty();
  if (!args->paint.empty()) {
    std::shared_ptr<PaintProgress>& progress = progress_[rt_.queueId(queue)];
    if (!progress) progress = std::make_shared<PaintProgress>();
    args->progress = progress;
    args->seq = ++progress->launched;
  }
  // The runtime owns the args from here on (and deletes them at once when the launch fails).
  if (rt_.launch_kernel(queue,
                        checks ? "opscope_memcheck_check_red_zones" : "opscope_memcheck_paint_red_zones",
                        reachKernel, args.release(), deleteArgs<ReachArgs>, nullptr) == MLURT_SUCCESS) {
    return true;
  }
  // The findings its checks were to leave are not there (the memory may hold an earlier batch's): the
  // batch reports nothing.
  if (f.batch) f.batch->lost = true;
  return false;
}

void RedZones::finishBatch(void* p) {
  const std::unique_ptr<Batch> batch(static_cast<Batch*>(p));
  if (batch->lost) return;
  for (const Batch::Check& c : batch->checks) {
    std::vector<std::string> damage(c.blocks.size());
    bool any = false;
    for (std::size_t i = 0; i < c.blocks.size(); ++i) {
      const std::uint64_t before = batch->found[2 * (c.at + i)], past = batch->found[2 * (c.at + i) + 1];
      if (before == 0 && past == 0) continue;
      damage[i] = redZoneDamage(before, past, c.blocks[i].size);
      batch->zones->repaint(c.blocks[i]);  // one overflow is reported once
      any = true;
    }
    if (any) c.done(c.blocks, damage);
  }
}

bool RedZones::checkOn(mlurtQueue_t queue, int device, std::vector<LiveAllocation> blocks, CheckDone done) {
  for (const LiveAllocation& a : blocks) {
    if (a.device != device) return false;
  }
  const std::size_t n = blocks.size();
  std::unique_lock lock(mutex_);
  Device* d = deviceLocked(device);
  if (d == nullptr || d->unreliable || n > kFindingsBlocks) return false;
  Findings& f = findings_[queue];
  if (f.data == nullptr) {
    void* memory = nullptr;
    const std::size_t bytes = 2 * sizeof(std::uint64_t) * kFindingsBlocks;
    if (rt_.malloc(&memory, bytes) != MLURT_SUCCESS) return false;
    addOwnDeviceBytes(device, counted(bytes));
    f.data = static_cast<std::uint64_t*>(memory);
  }
  if (f.batch && f.used + n > kFindingsBlocks) {
    // Full: its findings are copied back before this check's kernel writes over them.
    auto failed = launchBatchLocked(queue, f);
    if (failed) {
      lock.unlock();
      finishFailedBatch(queue, std::move(failed));
      lock.lock();
    }
  }
  if (!f.batch) {
    f.batch = std::make_unique<Batch>();
    f.batch->zones = this;
    f.used = 0;
  }
  // Queued with the next paint on this queue (or at the next flush), in one kernel: the zones are read in
  // the queue's order, after this op and before anything queued after the kernel.
  if (!f.pending) f.pending = std::make_unique<ReachArgs>();
  if (f.pending->zones.empty()) f.pending->found = f.data + 2 * f.used;
  // Paints queued on other queues that may not have run: these zones are judged only once they have.
  const std::uint64_t id = progress_.empty() ? 0 : rt_.queueId(queue);
  for (const auto& [other, progress] : progress_) {
    if (other != id && progress->done.load(std::memory_order_acquire) < progress->launched) {
      f.pending->after.push_back(
          {f.pending->zones.size(), f.pending->zones.size() + 2 * n, progress, progress->launched});
    }
  }
  for (const LiveAllocation& a : blocks) {
    auto* user = reinterpret_cast<unsigned char*>(a.ptr);
    f.pending->zones.push_back({user - a.front, a.front});
    f.pending->zones.push_back({user + a.size, a.back});
  }
  f.batch->checks.push_back({std::move(blocks), f.used, std::move(done)});
  f.used += n;
  return true;
}

// Requires mutex_: queues the copy of the batch's findings and the host function that looks at them. The
// batch back when that could not be done (finishFailedBatch()).
std::unique_ptr<RedZones::Batch> RedZones::launchBatchLocked(mlurtQueue_t queue, Findings& f) {
  launchPendingLocked(queue, f);  // the checks' kernel first (a failed one marks the batch lost)
  std::unique_ptr<Batch> batch = std::move(f.batch);
  batch->found.assign(2 * f.used, 0);
  const std::size_t bytes = 2 * sizeof(std::uint64_t) * f.used;
  f.used = 0;
  if (rt_.memcpy_async(batch->found.data(), f.data, bytes, queue, MLURT_MEMCPY_DEVICE_TO_HOST) !=
      MLURT_SUCCESS)
    return batch;
  if (rt_.launch_host_func(queue, &RedZones::finishBatch, batch.get()) != MLURT_SUCCESS) return batch;
  static_cast<void>(batch.release());  // the host function owns it
  return nullptr;
}

// A batch whose copy or host function could not be queued: looked at here once the queue has run what was
// queued (outside the lock, which host functions queued before take to repaint). A copy that was not
// queued leaves its findings 0 (the host copy's): the checks find nothing rather than something wrong.
void RedZones::finishFailedBatch(mlurtQueue_t queue, std::unique_ptr<Batch> batch) {
  rt_.queue_sync(queue);
  finishBatch(batch.release());
}

void RedZones::flushChecks(mlurtQueue_t queue) {
  if (!enabled()) return;  // no zones, no checks (and no lock taken at every free)
  std::vector<std::pair<mlurtQueue_t, std::unique_ptr<Batch>>> failed;
  {
    std::lock_guard lock(mutex_);
    for (auto& [q, f] : findings_) {
      if ((queue == nullptr || q == queue) && f.batch) {
        if (auto batch = launchBatchLocked(q, f)) failed.emplace_back(q, std::move(batch));
      }
    }
  }
  for (auto& [q, batch] : failed) finishFailedBatch(q, std::move(batch));
}

void RedZones::waitAll() {
  flushChecks(nullptr);
  std::set<int> devices;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [device, d] : devices_) devices.insert(device);
  }
  waitForDevices(devices);
}

std::vector<std::string> RedZones::check(const std::vector<LiveAllocation>& blocks) {
  std::vector<std::string> damage(blocks.size());
  // Per device: one kernel checks its blocks' zones and leaves a flag per block, one copy brings the flags.
  struct Batch {
    std::vector<std::size_t> blocks;  // indices into blocks
    std::vector<unsigned char> flags;
    mlurtQueue_t queue = nullptr;
  };
  std::map<int, Batch> batches;
  std::vector<void*> outgrown;  // flag buffers too small: freed outside the lock (mlurtFree waits for work)
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].front > 0 || blocks[i].back > 0) batches[blocks[i].device].blocks.push_back(i);
  }
  {
    std::lock_guard lock(mutex_);
    for (auto& [device, batch] : batches) {
      Device* d = deviceLocked(device);
      if (d == nullptr) continue;
      paintLocked(*d);  // the check runs after the paint, on the same queue
      if (d->unreliable) continue;
      const std::size_t n = batch.blocks.size();
      if (d->flag_bytes < n) {
        void* grown = nullptr;
        const std::size_t bytes = std::max(n, 2 * d->flag_bytes);
        if (rt_.malloc(&grown, bytes) != MLURT_SUCCESS) continue;
        if (d->flags != nullptr) outgrown.push_back(d->flags);
        addOwnDeviceBytes(device, counted(bytes) - (d->flags != nullptr ? counted(d->flag_bytes) : 0));
        d->flags = static_cast<unsigned char*>(grown);
        d->flag_bytes = bytes;
      }
      auto args = std::make_unique<CheckArgs>();
      args->zones.reserve(2 * n);
      for (std::size_t i : batch.blocks) {
        const LiveAllocation& a = blocks[i];
        auto* user = reinterpret_cast<unsigned char*>(a.ptr);
        args->zones.push_back({user - a.front, a.front});
        args->zones.push_back({user + a.size, a.back});
      }
      args->flags = d->flags;
      // The runtime owns the args from here on.
      if (rt_.launch_kernel(d->queue, "opscope_memcheck_check_red_zones", checkKernel, args.release(),
                            deleteArgs<CheckArgs>, nullptr) != MLURT_SUCCESS) {
        continue;
      }
      batch.flags.assign(n, 0);
      if (rt_.memcpy_async(batch.flags.data(), d->flags, n, d->queue, MLURT_MEMCPY_DEVICE_TO_HOST) ==
          MLURT_SUCCESS) {
        batch.queue = d->queue;
      }
    }
  }
  for (void* old : outgrown) rt_.free(old);  // after the kernels queued with it
  // The few damaged blocks: their zones are copied back to say how far the write went, then repainted.
  std::vector<std::size_t> damaged;
  std::vector<std::vector<unsigned char>> zones;
  std::set<mlurtQueue_t> reading;
  for (auto& [device, batch] : batches) {
    if (batch.queue == nullptr || rt_.queue_sync(batch.queue) != MLURT_SUCCESS) continue;
    for (std::size_t k = 0; k < batch.blocks.size(); ++k) {
      if (batch.flags[k] == 0) continue;
      const LiveAllocation& a = blocks[batch.blocks[k]];
      auto* user = reinterpret_cast<unsigned char*>(a.ptr);
      std::vector<unsigned char> bytes(a.front + a.back);
      if ((a.front == 0 || rt_.memcpy_async(bytes.data(), user - a.front, a.front, batch.queue,
                                            MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS) &&
          (a.back == 0 || rt_.memcpy_async(bytes.data() + a.front, user + a.size, a.back, batch.queue,
                                           MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS)) {
        damaged.push_back(batch.blocks[k]);
        zones.push_back(std::move(bytes));
        reading.insert(batch.queue);
      }
    }
  }
  for (mlurtQueue_t queue : reading) {
    if (rt_.queue_sync(queue) != MLURT_SUCCESS) return damage;
  }
  for (std::size_t k = 0; k < damaged.size(); ++k) {
    const LiveAllocation& a = blocks[damaged[k]];
    damage[damaged[k]] = redZoneDamage(zones[k].data(), a.front, a.back, a.size);
    auto* user = reinterpret_cast<unsigned char*>(a.ptr);
    if (a.front > 0) queuePaint(a.device, {user - a.front, a.front});
    if (a.back > 0) queuePaint(a.device, {user + a.size, a.back});
  }
  return damage;
}

void RedZones::paint(const LiveAllocation& a) {
  if (a.front == 0 && a.back == 0) return;
  {
    std::lock_guard lock(mutex_);
    if (Device* d = deviceLocked(a.device)) d->drain = true;
  }
  if (a.front > 0) queuePaint(a.device, {reinterpret_cast<unsigned char*>(a.ptr) - a.front, a.front});
  repaintBack(a);
}

void RedZones::repaint(const LiveAllocation& a) {
  if (a.front > 0) queuePaint(a.device, {reinterpret_cast<unsigned char*>(a.ptr) - a.front, a.front});
  repaintBack(a);
}

void RedZones::repaintBack(const LiveAllocation& a) {
  if (a.back > 0) queuePaint(a.device, {reinterpret_cast<unsigned char*>(a.ptr) + a.size, a.back});
}

bool RedZones::waitForDevices(const std::set<int>& devices) {
  const int current = rt_.currentDevice();
  bool idle = true;
  for (int device : devices) {
    rt_.set_device(device);
    idle = rt_.device_sync() == MLURT_SUCCESS && idle;
  }
  rt_.set_device(current);
  return idle;
}

RedZones::Device* RedZones::deviceLocked(int device) {
  Device& d = devices_[device];
  if (d.queue == nullptr) {
    const int current = rt_.currentDevice();
    rt_.set_device(device);
    if (rt_.queue_create(&d.queue) != MLURT_SUCCESS) d.queue = nullptr;
    rt_.set_device(current);
  }
  return d.queue != nullptr ? &d : nullptr;
}

}  // namespace opscope::memcheck
