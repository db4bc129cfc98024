#include "red_zones.h"

#include <fmt/format.h>

namespace opscope::memcheck {

std::size_t frontRedZone(std::size_t configured) {
  return (configured + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

std::string redZoneDamage(const unsigned char* zones, std::size_t front, std::size_t back, std::size_t size) {
  std::size_t before = 0;  // bytes from the furthest one written before the start
  for (std::size_t j = 0; j < front; ++j) {
    if (zones[j] != kRedZoneByte) {
      before = front - j;
      break;
    }
  }
  std::size_t past = 0;  // one past the furthest byte written after the end
  for (std::size_t j = 0; j < back; ++j) {
    if (zones[front + j] != kRedZoneByte) past = j + 1;
  }
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
  blocks_[a.ptr] = block;
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
    blocks_.erase(it);
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

int Runtime::currentDevice() const {
  int device = 0;
  if (get_device == nullptr || get_device(&device) != MLURT_SUCCESS) return 0;
  return device;
}

mlurtStatus_t RedZones::allocate(std::size_t size, void** user) {
  void* block = nullptr;
  const mlurtStatus_t status = rt_.malloc(&block, front_ + size + back_);
  if (status != MLURT_SUCCESS) return status;
  auto* base = static_cast<unsigned char*>(block);
  mlurtQueue_t queue = queueFor(rt_.currentDevice());
  // A small block is painted whole, the program's bytes too (fresh device memory holds garbage anyway): one
  // task on the device queue instead of two, which is most of what a small allocation costs.
  const bool whole = wholeBlock(front_ + size + back_);
  if (queue == nullptr ||
      (whole && rt_.memset_async(base, kRedZoneByte, front_ + size + back_, queue) != MLURT_SUCCESS) ||
      (!whole && front_ > 0 && rt_.memset_async(base, kRedZoneByte, front_, queue) != MLURT_SUCCESS) ||
      (!whole && back_ > 0 &&
       rt_.memset_async(base + front_ + size, kRedZoneByte, back_, queue) != MLURT_SUCCESS)) {
    rt_.free(block);
    return MLURT_ERROR_INTERNAL;
  }
  paint_pending_.store(true, std::memory_order_release);
  *user = base + front_;
  return MLURT_SUCCESS;
}

void RedZones::release(const LiveAllocation& a) {
  rt_.free(reinterpret_cast<unsigned char*>(a.ptr) - a.front);
}

void RedZones::settle() {
  if (!paint_pending_.exchange(false, std::memory_order_acq_rel)) return;
  std::lock_guard lock(mutex_);
  for (const auto& [device, queue] : queues_) {
    if (queue != nullptr) rt_.queue_sync(queue);
  }
}

std::vector<std::string> RedZones::check(const std::vector<LiveAllocation>& blocks) {
  std::vector<std::string> damage(blocks.size());
  std::vector<std::vector<unsigned char>> zones(blocks.size());
  std::set<mlurtQueue_t> used;
  std::vector<bool> read(blocks.size(), false);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const LiveAllocation& a = blocks[i];
    mlurtQueue_t queue = queueFor(a.device);
    if (queue == nullptr) continue;
    auto* user = reinterpret_cast<unsigned char*>(a.ptr);
    if (wholeBlock(a.front + a.size + a.back)) {  // one copy of the whole small block, then the zones kept
      zones[i].resize(a.front + a.size + a.back);
      read[i] = rt_.memcpy_async(zones[i].data(), user - a.front, zones[i].size(), queue,
                                 MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS;
    } else {
      zones[i].resize(a.front + a.back);
      read[i] = (a.front == 0 || rt_.memcpy_async(zones[i].data(), user - a.front, a.front, queue,
                                                  MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS) &&
                (a.back == 0 || rt_.memcpy_async(zones[i].data() + a.front, user + a.size, a.back, queue,
                                                 MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS);
    }
    used.insert(queue);
  }
  for (mlurtQueue_t queue : used) {
    if (rt_.queue_sync(queue) != MLURT_SUCCESS) return damage;
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (!read[i]) continue;
    const LiveAllocation& a = blocks[i];
    if (zones[i].size() > a.front + a.back) {  // read whole: drop the program's bytes between the zones
      zones[i].erase(zones[i].begin() + static_cast<std::ptrdiff_t>(a.front),
                     zones[i].begin() + static_cast<std::ptrdiff_t>(a.front + a.size));
    }
    damage[i] = redZoneDamage(zones[i].data(), a.front, a.back, a.size);
    if (damage[i].empty()) continue;
    auto* user = reinterpret_cast<unsigned char*>(a.ptr);
    mlurtQueue_t queue = queueFor(a.device);
    if (a.front > 0) rt_.memset_async(user - a.front, kRedZoneByte, a.front, queue);
    if (a.back > 0) rt_.memset_async(user + a.size, kRedZoneByte, a.back, queue);
  }
  return damage;
}

void RedZones::repaintBack(const LiveAllocation& a) {
  if (a.back == 0) return;
  if (mlurtQueue_t queue = queueFor(a.device)) {
    rt_.memset_async(reinterpret_cast<unsigned char*>(a.ptr) + a.size, kRedZoneByte, a.back, queue);
  }
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

mlurtQueue_t RedZones::queueFor(int device) {
  std::lock_guard lock(mutex_);
  mlurtQueue_t& queue = queues_[device];
  if (queue == nullptr) {
    const int current = rt_.currentDevice();
    rt_.set_device(device);
    if (rt_.queue_create(&queue) != MLURT_SUCCESS) queue = nullptr;
    rt_.set_device(current);
  }
  return queue;
}

}  // namespace opscope::memcheck
