// spare_nodes.h — map entries that reuse the nodes of entries that left (std::map / std::unordered_map node
// handles): memcheck's tables take and give back an entry at every allocation and free, and a heap
// allocation per entry was a third of their cost.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace opscope::memcheck {

template <typename Map>
using SpareNodes = std::vector<typename Map::node_type>;

// map[key] = value, in a spare node when there is one.
template <typename Map>
void insertReusing(Map& map, SpareNodes<Map>& spare, const typename Map::key_type& key,
                   const typename Map::mapped_type& value) {
  if (spare.empty()) {
    map[key] = value;
    return;
  }
  typename Map::node_type node = std::move(spare.back());
  spare.pop_back();
  node.key() = key;
  node.mapped() = value;
  auto inserted = map.insert(std::move(node));
  if (!inserted.inserted) map[key] = value;  // the key was there: the node is dropped
}

// Erases the entry at it, keeping its node while fewer than max are kept.
template <typename Map>
void eraseKeeping(Map& map, SpareNodes<Map>& spare, typename Map::iterator it, std::size_t max) {
  if (spare.size() < max) {
    spare.push_back(map.extract(it));
  } else {
    map.erase(it);
  }
}

}  // namespace opscope::memcheck
