// consistency.h — OP_RANK_CONSISTENCY's records, and where the ranks' records first differ.
//
// consistency.jsonl (in each rank's result directory) has a line per buffer that data parallelism keeps
// identical across the ranks, hashed (XXH3-64) right after the op or transfer that wrote it:
//   {"step":S,"index":I,"kind":"param"|"grad","op":NAME,"seq":N,"bytes":B,"hash":"<16 hex digits>"}
// and a line per step once the program has ended it (that step's records may come later in the file: each
// is written when its queue gets to it):
//   {"step":S,"records":K}
// (step, index) names the same buffer on every rank of one program. The flight recorder compares the ranks'
// files while the run goes on (each rank reads the others' from the shared run folder); `opscope analyze`
// compares them afterwards. Lines are untrusted: a malformed one is neither kind.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace opscope::consistency {

// The longest line read (a record is about 150 bytes).
inline constexpr std::size_t kMaxLineBytes = 4096;

struct Record {
  std::int64_t step = 0, index = 0, seq = 0;
  std::string kind;  // "param" (after an optimizer op) or "grad" (after an all-reduce)
  std::string op;    // the op or collective that wrote the buffer
  std::string hash;
};

struct StepEnd {
  std::int64_t step = 0;
  std::int64_t records = 0;  // how many records the step has
};

// A line without its newline: a record, a step's end, or neither (malformed).
inline std::variant<std::monostate, Record, StepEnd> parseLine(std::string_view line);

// Whole lines out of a file read piece by piece as it grows: a line is handed on once its newline came; a
// line longer than kMaxLineBytes is dropped (read to its end, never held whole), so a hostile file cannot
// make it hold much.
class LineSplitter {
 public:
  template <typename OnLine>
  void feed(std::string_view chunk, OnLine&& on_line) {
    for (std::size_t nl; (nl = chunk.find('\n')) != std::string_view::npos; chunk.remove_prefix(nl + 1)) {
      if (!skipping_ && partial_.size() + nl <= kMaxLineBytes) {
        partial_.append(chunk.substr(0, nl));
        on_line(std::string_view(partial_));
      }
      partial_.clear();
      skipping_ = false;
    }
    if (skipping_) return;
    if (partial_.size() + chunk.size() > kMaxLineBytes) {
      partial_.clear();
      skipping_ = true;
    } else {
      partial_.append(chunk);
    }
  }

 private:
  std::string partial_;    // a line not ended yet
  bool skipping_ = false;  // in a line too long to be one
};

using Key = std::pair<std::int64_t, std::int64_t>;  // (step, index)
using Records = std::map<Key, Record>;

struct Difference {
  Record record;            // the first record the ranks do not all agree on (as one of them has it)
  std::vector<int> ranks;   // the ranks unlike the most common hash
  std::vector<int> others;  // the ranks with the most common hash
};

struct Comparison {
  std::size_t compared = 0;   // (step, index) keys seen
  std::size_t differing = 0;  // keys whose hashes do not all agree
  std::optional<Difference> first;
};

// Compares the records of several ranks key by key, in (step, index) order.
inline Comparison compare(const std::vector<std::pair<int, const Records*>>& ranks);

// "0,2,3", or past 32 ranks "0,2,3,...,40,… (1000 ranks)".
inline std::string rankList(const std::vector<int>& ranks);

// "the parameters written by adamw_step #100 (record 17 of the step) on rank(s) 2, unlike rank(s) 0,1,3".
inline std::string describe(const Difference& d);

// ---- implementation (header-only: the viewer is also built alone, for fuzzing)

namespace detail {

using json = nlohmann::json;

inline std::optional<std::int64_t> wholeNumber(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    return v > static_cast<std::uint64_t>(INT64_MAX) ? std::nullopt
                                                     : std::optional(static_cast<std::int64_t>(v));
  }
  if (it->is_number_integer()) return it->get<std::int64_t>();
  return std::nullopt;
}

inline std::optional<std::string> shortText(const json& j, const char* key, std::size_t max) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > max) return std::nullopt;
  return s;
}

}  // namespace detail

inline std::variant<std::monostate, Record, StepEnd> parseLine(std::string_view line) {
  using detail::json;
  using detail::shortText;
  using detail::wholeNumber;
  if (line.size() > kMaxLineBytes) return {};
  // Flat objects only: a nesting callback refuses anything deeper, so a hostile line cannot recurse.
  const json j = json::parse(
      line, [](int depth, json::parse_event_t, json&) { return depth <= 1; }, false);
  if (!j.is_object()) return {};
  const auto step = wholeNumber(j, "step");
  if (!step || *step < 0) return {};
  if (j.contains("records")) {
    const auto records = wholeNumber(j, "records");
    if (!records || *records < 0) return {};
    return StepEnd{*step, *records};
  }
  const auto index = wholeNumber(j, "index");
  const auto seq = wholeNumber(j, "seq");
  auto kind = shortText(j, "kind", 16);
  auto op = shortText(j, "op", 64);
  auto hash = shortText(j, "hash", 32);
  if (!index || *index < 0 || !kind || !op || !hash) return {};
  return Record{*step, *index, seq.value_or(0), std::move(*kind), std::move(*op), std::move(*hash)};
}

inline Comparison compare(const std::vector<std::pair<int, const Records*>>& ranks) {
  Comparison out;
  std::vector<Key> keys;
  for (const auto& [rank, records] : ranks)
    for (const auto& entry : *records) keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  out.compared = keys.size();
  for (const Key& key : keys) {
    std::map<std::string, std::vector<int>> by_hash;
    const Record* any = nullptr;
    for (const auto& [rank, records] : ranks) {
      const auto it = records->find(key);
      if (it == records->end()) continue;
      by_hash[it->second.hash].push_back(rank);
      any = &it->second;
    }
    if (by_hash.size() < 2) continue;
    ++out.differing;
    if (out.first) continue;
    const auto common = std::max_element(by_hash.begin(), by_hash.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    Difference d{*any, {}, common->second};
    for (const auto& [hash, who] : by_hash)
      if (&hash != &common->first) d.ranks.insert(d.ranks.end(), who.begin(), who.end());
    std::sort(d.ranks.begin(), d.ranks.end());
    out.first = std::move(d);
  }
  return out;
}

inline std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size() && i < 32; ++i)
    s += (s.empty() ? "" : ",") + std::to_string(ranks[i]);
  if (ranks.size() > 32) s += fmt::format(",… ({} ranks)", ranks.size());
  return s;
}

inline std::string describe(const Difference& d) {
  const Record& r = d.record;
  return fmt::format("the {} {} #{} (record {} of the step) on rank(s) {}, unlike rank(s) {}",
                     r.kind == "param" ? "parameters written by" : "result of", r.op, r.seq, r.index,
                     rankList(d.ranks), rankList(d.others));
}

}  // namespace opscope::consistency
