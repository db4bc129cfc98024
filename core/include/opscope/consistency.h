// consistency.h — OP_RANK_CONSISTENCY's records, and where the ranks' records first differ.
//
// consistency.jsonl (in each rank's result directory) begins with its format's line
//   {"format":"opscope-consistency","format_version":V}
// (kFormatVersion; files written before it have none and are version 1), then has a line per buffer that
// data parallelism keeps identical across the ranks, hashed (XXH3-64) right after the op or transfer that
// wrote it:
//   {"step":S,"index":I,"kind":"param"|"grad","op":NAME,"seq":N,"bytes":B,"hash":"<16 hex digits>"}
// and a line per step once the program has ended it (that step's records may come later in the file: each
// is written when its queue gets to it):
//   {"step":S,"records":K}
// (step, index) names the same buffer on every rank of one program. The flight recorder compares the ranks'
// files while the run goes on (each rank reads the others' from the shared run folder); `opscope analyze`
// compares them afterwards. Lines are untrusted: anything but this exact layout is neither kind.
#pragma once

#include <fmt/format.h>

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

inline constexpr std::string_view kFile = "consistency.jsonl";
// 2: a record may say where in the program its op ran ("where", after "op"); version 1 files read as before.
inline constexpr std::int64_t kFormatVersion = 2;
// The longest "where" kept (a longer one is cut when written).
inline constexpr std::size_t kMaxWhereBytes = 512;

// The first line: {"format":"opscope-consistency","format_version":V}
struct Header {
  std::int64_t format_version = 0;
};
inline std::string headerLine() {
  return fmt::format("{{\"format\":\"opscope-consistency\",\"format_version\":{}}}\n", kFormatVersion);
}

struct Record {
  std::int64_t step = 0, index = 0, seq = 0;
  std::string kind;  // "param" (after an optimizer op) or "grad" (after an all-reduce)
  std::string op;    // the op or collective that wrote the buffer
  std::string hash;
  // Where in the program that op ran, when its framework said: "aten::sqrt_ in Optimizer.step#Adam.step at
  // train.py:57 in train" ("" when not known).
  std::string where;
};

struct StepEnd {
  std::int64_t step = 0;
  std::int64_t records = 0;  // how many records the step has
};

// A line without its newline: a record, a step's end, the header, or none of them (malformed).
using Line = std::variant<std::monostate, Record, StepEnd, Header>;
inline Line parseLine(std::string_view line);

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

// "the parameters written by adamw_step #100 (record 17 of the step) on rank(s) 2, unlike rank(s) 0,1,3";
// with the record's where: "... (record 17 of the step; in the program: aten::sqrt_ in ...) ...".
inline std::string describe(const Difference& d);

// The record line the recorder writes (where made fit: quotes, backslashes and control characters become '?',
// cut to kMaxWhereBytes).
inline std::string recordLine(std::int64_t step, std::int64_t index, std::string_view kind,
                              std::string_view op, std::string_view where, std::uint64_t seq,
                              std::size_t bytes, std::string_view hash);

// ---- implementation (header-only: opscope analyze, in analysis/, reads the records too)

namespace detail {

// A byte a record's where keeps as it is (recordLine writes '?' for any other).
inline bool whereByte(char c) {
  return c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
}

// Reads a line of the exact layout the recorder writes, left to right; any other text fails it.
struct Cursor {
  std::string_view s;
  bool ok = true;

  bool literal(std::string_view x) {
    ok = ok && s.starts_with(x);
    if (ok) s.remove_prefix(x.size());
    return ok;
  }
  // A whole number of 1 to 18 digits (no sign, no fraction).
  std::int64_t number() {
    std::size_t n = 0;
    while (n < s.size() && n < 19 && s[n] >= '0' && s[n] <= '9') ++n;
    ok = ok && n >= 1 && n <= 18;
    std::int64_t v = 0;
    for (std::size_t i = 0; ok && i < n; ++i) v = v * 10 + (s[i] - '0');
    if (ok) s.remove_prefix(n);
    return v;
  }
  // A quoted string of 1 to max characters, each one that fits (no escapes: the recorder writes none).
  template <typename Fits>
  std::string quotedRun(std::size_t max, Fits fits) {
    std::size_t n = 0;
    ok = ok && literal("\"");
    while (ok && n < s.size() && n <= max && fits(s[n])) ++n;
    ok = ok && n >= 1 && n <= max && n < s.size() && s[n] == '"';
    std::string out = ok ? std::string(s.substr(0, n)) : std::string();
    if (ok) s.remove_prefix(n + 1);
    return out;
  }
  // From [A-Za-z0-9_.-].
  std::string text(std::size_t max) {
    return quotedRun(max, [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
             c == '.' || c == '-';
    });
  }
  // Any byte but quotes, backslashes and control characters (what recordLine writes).
  std::string quoted(std::size_t max) { return quotedRun(max, whereByte); }
};

}  // namespace detail

// Lines are read back in exactly the layout and key order above (the recorder writes them so; a file from
// anywhere else may hold anything, and is read by this strict, bounded, allocation-light parser).
inline Line parseLine(std::string_view line) {
  if (line.size() > kMaxLineBytes) return {};
  detail::Cursor c{line};
  if (c.literal("{\"format\":\"opscope-consistency\",\"format_version\":")) {
    const std::int64_t version = c.number();
    c.literal("}");
    if (!c.ok || !c.s.empty()) return {};
    return Header{version};
  }
  c = detail::Cursor{line};
  c.literal("{\"step\":");
  const std::int64_t step = c.number();
  if (!c.ok) return {};
  if (c.literal(",\"records\":")) {
    const std::int64_t records = c.number();
    c.literal("}");
    if (!c.ok || !c.s.empty()) return {};
    return StepEnd{step, records};
  }
  c.ok = true;
  Record r;
  r.step = step;
  c.literal(",\"index\":");
  r.index = c.number();
  c.literal(",\"kind\":");
  r.kind = c.text(16);
  c.literal(",\"op\":");
  r.op = c.text(64);
  if (c.ok && c.s.starts_with(",\"where\":")) {
    c.literal(",\"where\":");
    r.where = c.quoted(kMaxWhereBytes);
  }
  c.literal(",\"seq\":");
  r.seq = c.number();
  c.literal(",\"bytes\":");
  c.number();
  c.literal(",\"hash\":");
  r.hash = c.text(32);
  c.literal("}");
  if (!c.ok || !c.s.empty()) return {};
  return r;
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
  return fmt::format("the {} {} #{} (record {} of the step{}) on rank(s) {}, unlike rank(s) {}",
                     r.kind == "param" ? "parameters written by" : "result of", r.op, r.seq, r.index,
                     r.where.empty() ? std::string() : "; in the program: " + r.where, rankList(d.ranks),
                     rankList(d.others));
}

inline std::string recordLine(std::int64_t step, std::int64_t index, std::string_view kind,
                              std::string_view op, std::string_view where, std::uint64_t seq,
                              std::size_t bytes, std::string_view hash) {
  std::string fitted(where.substr(0, kMaxWhereBytes));
  for (char& c : fitted)
    if (!detail::whereByte(c)) c = '?';
  return fmt::format(
      "{{\"step\":{},\"index\":{},\"kind\":\"{}\",\"op\":\"{}\"{},\"seq\":{},\"bytes\":{},\"hash\":\"{}\"}}"
      "\n",
      step, index, kind, op, fitted.empty() ? std::string() : ",\"where\":\"" + fitted + "\"", seq, bytes,
      hash);
}

}  // namespace opscope::consistency
