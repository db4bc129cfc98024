#include <opscope/analysis/analyze.h>
#include <opscope/consistency.h>
#include <opscope/op_call.h>
#include <opscope/results/flight_recorder_file.h>
#include <opscope/results/format_version.h>
#include <opscope/results/run_file.h>
#include <opscope/results/run_folder.h>

#include <opscope/results/json_input.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace opscope::analysis {

namespace fs = std::filesystem;
using nlohmann::json;
using results::checkReadable;
using results::integer;
using results::readBoundedLine;
using results::readJsonFile;
using results::text;

namespace {

// A dump is a few MB for thousands of collectives with their backtraces.
constexpr std::uintmax_t kMaxDumpBytes = results::kMaxFlightRecorderFileBytes;
constexpr std::size_t kMaxLate = 20;
constexpr double kLateS = 0.1;
// A late rank is a finding (the verdict, exit status 1) from this much: less is listed only (a loaded
// machine delays ranks by a tenth of a second now and then).
constexpr double kLateFindingS = 0.5;

// A timestamp of a dump, clamped to [0, 2^61] so that sums and differences of two cannot overflow.
std::int64_t nanoseconds(const json& j, const char* key) {
  return std::clamp<std::int64_t>(integer(j, key).value_or(0), 0, std::int64_t{1} << 61);
}

using consistency::rankList;

std::vector<int> ranksOf(const json& list) {
  std::vector<int> out;
  for (const json& r : list)
    if (r.is_number_integer()) out.push_back(r.get<int>());
  return out;
}

// One collective of one rank's dump.
struct Entry {
  std::int64_t seq = 0;
  std::string collective, dtype, op, state;
  Collective kind = Collective::kCount;  // of collective (kCount: a name that is none of libmlucl's)
  std::int64_t count = 0, root = -1, peer = -1, status = 0, op_seq = 0;
  std::optional<std::int64_t> calling_unix_ns;   // on the rank's CLOCK_REALTIME
  std::optional<std::int64_t> enqueued_unix_ns;  // (its host call returned)
  std::int64_t stack = 0;
  // The program's op that issued it ("c10d::allreduce_", and where: "... in main.py:57 in train"); "".
  std::string issued_by;
  // What the ranks must agree on.
  std::string signature() const {
    std::string s = fmt::format("{} {} x {}", collective, count, dtype);
    if (!op.empty()) s += " " + op;
    if (kind == Collective::kBroadcast) s += fmt::format(" root {}", root);
    return s;
  }
};

// One rank's view of one communicator.
struct Member {
  int rank = 0;
  std::int64_t last_enqueued = 0, last_started = 0, last_completed = 0;
  std::string error;
  std::map<std::int64_t, Entry> collectives;  // by seq (send / recv left out: their numbers are the pair's)
  std::vector<Entry> p2p;                     // sends and receives (numbered per peer and direction)
  bool wrapped = false;                       // its ring let older entries go
  const json* dump = nullptr;
};

// A rank's flight-recorder dump: the file without its comms' entries (head), and those entries, per comm of
// head["comms"], as read.
struct Dump {
  json head;
  std::vector<std::vector<Entry>> entries;
};

// One entry of a dump's comm, its times still on the rank's CLOCK_MONOTONIC; nullopt for one that is not an
// entry (no collective, or no positive seq).
std::optional<Entry> entryOf(const json& e) {
  results::FlightRecorderEntry r;
  results::fromJson(e, r);
  Entry x;
  x.collective = std::move(r.collective);
  x.kind = parseCollective(x.collective);
  if (x.collective.empty()) return std::nullopt;
  x.seq = std::min<std::int64_t>(r.seq, std::int64_t{1} << 62);
  if (x.seq <= 0) return std::nullopt;
  x.dtype = std::move(r.dtype);
  x.op = std::move(r.op);
  x.state = std::move(r.state);
  x.count = r.count;
  x.root = r.root.value_or(-1);
  x.status = r.status;
  x.stack = r.stack;
  x.op_seq = r.op_seq;
  if (!r.framework_op.empty()) x.issued_by = results::issuedByText(r.framework_op, r.in_backward, r.site);
  // Times clamped (see nanoseconds()).
  const auto clamped = [](std::int64_t ns) { return std::clamp<std::int64_t>(ns, 0, std::int64_t{1} << 61); };
  if (r.calling_ns) x.calling_unix_ns = clamped(*r.calling_ns);
  if (r.enqueued_ns) x.enqueued_unix_ns = clamped(*r.enqueued_ns);
  if (isPointToPoint(x.kind)) x.peer = r.peer.value_or(-1);
  return x;
}

// libmlucl's message when the ranks disagree on a transfer ("... the ranks disagree: ranks 0,2: allreduce #2
// sum float32 x 1024; rank 1: allreduce #2 sum float32 x 1023 (this is rank 0; ...)"): each group of ranks
// and what they posted; empty for another message.
std::vector<std::pair<std::vector<int>, std::string>> disagreement(const std::string& message) {
  std::vector<std::pair<std::vector<int>, std::string>> groups;
  const std::string key = "the ranks disagree: ";
  std::size_t at = message.find(key);
  if (at == std::string::npos) return groups;
  at += key.size();
  const std::size_t end = std::min(message.find(" (this is", at), message.size());
  const std::string body = message.substr(at, end - at);
  std::size_t begin = 0;
  while (begin < body.size() && groups.size() < 64) {
    std::size_t stop = body.find("; ", begin);
    if (stop == std::string::npos) stop = body.size();
    const std::string part = body.substr(begin, stop - begin);
    begin = stop + 2;
    const std::size_t colon = part.find(": ");
    if (colon == std::string::npos || !(part.starts_with("rank ") || part.starts_with("ranks "))) return {};
    std::vector<int> ranks;
    const std::string list = part.substr(part.find(' ') + 1, colon - part.find(' ') - 1);
    std::size_t p = 0;
    while (p < list.size() && ranks.size() < 4096) {
      std::size_t q = list.find(',', p);
      if (q == std::string::npos) q = list.size();
      try {
        ranks.push_back(std::stoi(list.substr(p, q - p)));
      } catch (const std::exception&) {
        return {};
      }
      p = q + 1;
    }
    groups.emplace_back(std::move(ranks), part.substr(colon + 2));
  }
  return groups.size() >= 2 ? groups : decltype(groups){};
}

json backtraceOf(const json& dump, std::int64_t stack) {
  const json& all = dump.contains("backtraces") ? dump["backtraces"] : json();
  const std::string key = std::to_string(stack);
  if (!all.is_object() || !all.contains(key) || !all[key].is_array()) return json::array();
  json out = json::array();
  for (const json& f : all[key])
    if (f.is_string() && out.size() < 64) out.push_back(f);
  return out;
}

// libmlucl's message when the two ranks of a send/recv pair disagree ("mlucl recv #2 from rank 1 float32 x
// 1024 (communicator 1, rank 0 of 2): rank 1 posted send #2 to rank 0 float32 x 1023 (no data was moved)"):
// this rank, what it posted, the peer, what the peer posted.
struct PairDisagreement {
  int rank = 0, peer = 0;
  std::string mine, theirs;
};
std::optional<PairDisagreement> pairDisagreement(const std::string& message) {
  const std::string head = "mlucl ", comm = " (communicator ", posted = " posted ",
                    tail = " (no data was moved)";
  const std::size_t c = message.find(comm);
  const std::size_t colon = message.find("): rank ", c == std::string::npos ? 0 : c);
  const std::size_t p = message.find(posted, colon == std::string::npos ? 0 : colon);
  const std::size_t t = message.rfind(tail);
  if (!message.starts_with(head) || c == std::string::npos || colon == std::string::npos ||
      p == std::string::npos || t == std::string::npos || t < p)
    return std::nullopt;
  PairDisagreement d;
  d.mine = message.substr(head.size(), c - head.size());
  d.theirs = message.substr(p + posted.size(), t - p - posted.size());
  const std::string in = message.substr(c + comm.size(), colon - c - comm.size());  // "1, rank 0 of 2"
  const std::size_t r = in.find("rank ");
  try {
    if (r == std::string::npos) return std::nullopt;
    d.rank = std::stoi(in.substr(r + 5));
    d.peer = std::stoi(message.substr(colon + 8, p - colon - 8));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (d.mine.size() > 200 || d.theirs.size() > 200) return std::nullopt;
  return d;
}

// Sends and receives: rank a's send #k to rank b is matched by rank b's recv #k from rank a. A send or recv
// whose peer posted no match (the peer's dump there, its ring whole) names a wrong peer or a missing call; a
// matched pair must agree on count and dtype (as the program passed them).
void pointToPoint(const std::string& comm, const std::vector<Member>& members, json& mismatches,
                  std::vector<std::string>& verdict) {
  std::map<int, const Member*> by_rank;
  using Key = std::tuple<int, Collective, std::int64_t, std::int64_t>;  // rank, kind, peer, seq
  std::map<Key, const Entry*> posted;
  // The last sequence number each rank posted of each kind to each peer (rank, kind, peer): the "its last
  // recv from rank 1 is #7" of an unmatched call, looked up instead of scanning the peer's calls per call.
  std::map<std::tuple<int, Collective, std::int64_t>, std::int64_t> last_posted;
  for (const Member& m : members) {
    by_rank[m.rank] = &m;
    for (const Entry& e : m.p2p) {
      if (e.state != "refused") posted[{m.rank, e.kind, e.peer, e.seq}] = &e;
      std::int64_t& last = last_posted[{m.rank, e.kind, e.peer}];
      last = std::max(last, e.seq);
    }
  }
  // Each disagreement is listed up to a bound per communicator; the rest are counted (a job whose every
  // send went to the wrong peer is one finding, not a million lines).
  constexpr std::size_t kMaxListed = 100;
  std::size_t found = 0;
  for (const auto& [key, e] : posted) {
    const auto& [rank, kind, peer, seq] = key;
    const auto other = by_rank.find(static_cast<int>(peer));
    if (other == by_rank.end()) continue;  // no dump from the peer
    const bool send = kind == Collective::kSend;
    const Collective match = send ? Collective::kRecv : Collective::kSend;
    const std::string_view match_kind = collectiveName(match);
    const char* way = send ? "to" : "from";
    const char* back = send ? "from" : "to";
    std::string what;
    if (const auto m = posted.find({static_cast<int>(peer), match, rank, seq}); m != posted.end()) {
      if (!send || (m->second->count == e->count && m->second->dtype == e->dtype)) continue;
      what = fmt::format(
          "rank {} posted send #{} to rank {} ({} x {}) where rank {} posted recv #{} from rank {} ({} x {})",
          rank, seq, peer, e->count, e->dtype, peer, seq, rank, m->second->count, m->second->dtype);
    } else {
      if (other->second->wrapped) continue;  // the match may have left its ring
      const auto l = last_posted.find({static_cast<int>(peer), match, rank});
      const std::int64_t last = l != last_posted.end() ? l->second : 0;
      what =
          fmt::format("rank {}'s {} #{} {} rank {} ({} x {}) has no matching {} on rank {} ({})", rank,
                      collectiveName(kind), seq, way, peer, e->count, e->dtype, match_kind, peer,
                      last == 0 ? fmt::format("it posted no {} {} rank {}", match_kind, back, rank)
                                : fmt::format("its last {} {} rank {} is #{}", match_kind, back, rank, last));
    }
    if (++found > kMaxListed) continue;
    mismatches.push_back(
        {{"seq", seq}, {"collective", collectiveName(kind)}, {"ranks", json::array({rank})}, {"what", what}});
    verdict.push_back(fmt::format("communicator {}: {}", comm, what));
  }
  if (found > kMaxListed) {
    const std::string what =
        fmt::format("and {} more sends and receives that do not match (the first {} are listed)",
                    found - kMaxListed, kMaxListed);
    mismatches.push_back({{"seq", nullptr}, {"collective", ""}, {"ranks", json::array()}, {"what", what}});
    verdict.push_back(fmt::format("communicator {}: {}", comm, what));
  }
  // libmlucl's own check of a pair (a count or dtype the program's arguments do not show): once per pair.
  std::set<std::pair<int, int>> said;
  for (const Member& m : members) {
    const auto d = pairDisagreement(m.error);
    if (!d || !said.insert({std::min(d->rank, d->peer), std::max(d->rank, d->peer)}).second) continue;
    const std::string what = fmt::format("rank {} posted {} where rank {} posted {} (libmlucl's check)",
                                         d->rank, d->mine, d->peer, d->theirs);
    mismatches.push_back(
        {{"seq", nullptr}, {"collective", ""}, {"ranks", json::array({d->rank, d->peer})}, {"what", what}});
    verdict.push_back(fmt::format("communicator {}: {}", comm, what));
  }
}

json analyzeComm(const std::string& comm, std::vector<Member>& members, std::int64_t size,
                 std::vector<std::string>& verdict) {
  json out = {{"comm", comm}, {"size", size}};
  std::vector<int> ranks;
  json per_rank = json::array();
  for (const Member& m : members) {
    ranks.push_back(m.rank);
    per_rank.push_back({{"rank", m.rank},
                        {"last_enqueued", m.last_enqueued},
                        {"last_started", m.last_started},
                        {"last_completed", m.last_completed},
                        {"error", m.error.empty() ? json() : json(m.error)},
                        {"reasons", m.dump->value("reasons", json::array())}});
  }
  out["ranks"] = ranks;
  out["per_rank"] = per_rank;

  // The first collective some rank has not completed, if any rank went on to (or is in) it.
  std::int64_t first = INT64_MAX;
  for (const Member& m : members) first = std::min(first, m.last_completed + 1);
  bool reached = false;
  for (const Member& m : members) {
    reached = reached || m.last_enqueued >= first || m.collectives.lower_bound(first) != m.collectives.end();
  }
  out["first_incomplete"] = nullptr;
  if (reached && first != INT64_MAX) {
    json never = json::array(), waiting = json::array(), failed = json::array(), completed = json::array();
    std::vector<int> never_ranks, failed_ranks, completed_ranks, waiting_ranks;
    const Entry* described = nullptr;
    for (const Member& m : members) {
      const auto it = m.collectives.find(first);
      const Entry* e = it != m.collectives.end() ? &it->second : nullptr;
      if (e != nullptr && e->state != "calling" && described == nullptr) described = e;
      if (e != nullptr && e->state == "calling") {
        never.push_back({{"rank", m.rank},
                         {"in_call", true},
                         {"issued_by", e->issued_by.empty() ? json() : json(e->issued_by)},
                         {"backtrace", backtraceOf(*m.dump, e->stack)}});
        never_ranks.push_back(m.rank);
        if (described == nullptr) described = e;
      } else if (e == nullptr && m.last_enqueued < first) {
        json last = nullptr;
        json trace = json::array();
        if (!m.collectives.empty()) {
          const Entry& l = m.collectives.rbegin()->second;
          last = {{"seq", l.seq}, {"collective", l.collective}, {"state", l.state}};
          if (!l.issued_by.empty()) last["issued_by"] = l.issued_by;
          trace = backtraceOf(*m.dump, l.stack);
        }
        never.push_back({{"rank", m.rank}, {"in_call", false}, {"last", last}, {"backtrace", trace}});
        never_ranks.push_back(m.rank);
      } else if (e != nullptr && (e->state == "failed" || e->state == "refused")) {
        failed.push_back(
            {{"rank", m.rank}, {"state", e->state}, {"error", m.error.empty() ? json() : json(m.error)}});
        failed_ranks.push_back(m.rank);
      } else if (e != nullptr && (e->state == "enqueued" || e->state == "started")) {
        std::optional<double> since;
        if (e->calling_unix_ns) {
          const std::int64_t dumped = nanoseconds(*m.dump, "dumped_unix_ns");
          if (dumped > *e->calling_unix_ns) since = static_cast<double>(dumped - *e->calling_unix_ns) / 1e9;
        }
        waiting.push_back(
            {{"rank", m.rank}, {"state", e->state}, {"waiting_s", since ? json(*since) : json()}});
        waiting_ranks.push_back(m.rank);
      } else {
        completed.push_back(m.rank);
        completed_ranks.push_back(m.rank);
      }
    }
    json fi = {{"seq", first},
               {"never_enqueued", never},
               {"not_completed", waiting},
               {"failed", failed},
               {"completed", completed}};
    std::string name = "collective";
    if (described != nullptr) {
      fi["collective"] = described->collective;
      fi["count"] = described->count;
      fi["dtype"] = described->dtype;
      if (!described->op.empty()) fi["op"] = described->op;
      if (described->kind == Collective::kBroadcast) fi["root"] = described->root;
      name = described->collective;
    }
    // The program's op that issued it, as the first rank that recorded one says.
    for (const Member& m : members) {
      const auto it = m.collectives.find(first);
      if (it != m.collectives.end() && !it->second.issued_by.empty()) {
        fi["issued_by"] = it->second.issued_by;
        break;
      }
    }
    out["first_incomplete"] = fi;
    const std::string what = fmt::format(
        "communicator {}: {} #{}{}", comm, name, first,
        fi.contains("issued_by") ? " (issued by " + fi["issued_by"].get<std::string>() + ")" : "");
    if (!never_ranks.empty()) {
      bool in_call = false;
      for (const json& n : never) in_call = in_call || n.value("in_call", false);
      verdict.push_back(fmt::format("{} was never enqueued by rank(s) {} ({}); rank(s) {} wait in it", what,
                                    rankList(never_ranks),
                                    in_call ? "the host call never returned" : "their code did not reach it",
                                    waiting_ranks.empty() ? std::string("none") : rankList(waiting_ranks)));
    } else if (!failed_ranks.empty()) {
      const bool odd = !completed_ranks.empty() && completed_ranks.size() < failed_ranks.size();
      verdict.push_back(fmt::format(
          "{} failed on rank(s) {}{}{}", what, rankList(failed_ranks),
          odd ? fmt::format("; only rank(s) {} completed it (the odd one(s) out)", rankList(completed_ranks))
              : std::string(),
          members.empty() || members.front().error.empty() ? std::string() : fmt::format(" ({})", [&] {
            for (const Member& m : members)
              if (!m.error.empty()) return m.error;
            return std::string();
          }())));
    } else if (!waiting_ranks.empty()) {
      verdict.push_back(fmt::format("{} did not complete on rank(s) {}", what, rankList(waiting_ranks)));
    }
  }

  // Every disagreement, in sequence order: the ranks that differ from the most common call.
  json mismatches = json::array();
  std::set<std::int64_t> seqs;
  for (const Member& m : members)
    for (const auto& [seq, e] : m.collectives) seqs.insert(seq);
  for (std::int64_t seq : seqs) {
    std::map<std::string, std::vector<int>> by_signature;
    std::string collective;
    for (const Member& m : members) {
      const auto it = m.collectives.find(seq);
      if (it == m.collectives.end() || it->second.state == "calling") continue;
      by_signature[it->second.signature()].push_back(m.rank);
      collective = it->second.collective;
    }
    if (by_signature.size() < 2) continue;
    const auto common =
        std::max_element(by_signature.begin(), by_signature.end(),
                         [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    for (const auto& [sig, who] : by_signature) {
      if (&sig == &common->first) continue;
      const std::string what = fmt::format("rank(s) {} called {} where rank(s) {} called {}", rankList(who),
                                           sig, rankList(common->second), common->first);
      mismatches.push_back({{"seq", seq}, {"collective", collective}, {"ranks", who}, {"what", what}});
      verdict.push_back(fmt::format("communicator {}: #{}: {}", comm, seq, what));
    }
  }
  // The disagreement libmlucl found when the ranks exchanged what they posted (a count or dtype that the
  // program's arguments do not show, a rank out of step): the smaller groups against the largest.
  for (const Member& m : members) {
    const auto groups = disagreement(m.error);
    if (groups.empty()) continue;
    const auto common = std::max_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.first.size() < b.first.size();
    });
    for (const auto& g : groups) {
      if (&g == &*common) continue;
      const std::string what =
          fmt::format("rank(s) {} posted {} where rank(s) {} posted {} (libmlucl's check)", rankList(g.first),
                      g.second, rankList(common->first), common->second);
      mismatches.push_back(
          {{"seq", out["first_incomplete"].is_object() ? out["first_incomplete"]["seq"] : json()},
           {"collective", ""},
           {"ranks", g.first},
           {"what", what}});
      verdict.push_back(fmt::format("communicator {}: {}", comm, what));
    }
    break;
  }
  pointToPoint(comm, members, mismatches, verdict);
  out["mismatches"] = mismatches;

  // Late arrivals: a rank that posted a collective (its host call returned) well after every other rank.
  json late = json::array();
  std::vector<std::tuple<double, std::int64_t, std::string, int>> lates;
  for (std::int64_t seq : seqs) {
    std::vector<std::pair<std::int64_t, int>> times;
    std::string collective;
    for (const Member& m : members) {
      const auto it = m.collectives.find(seq);
      if (it == m.collectives.end() || !it->second.enqueued_unix_ns) continue;
      times.emplace_back(*it->second.enqueued_unix_ns, m.rank);
      collective = it->second.collective;
    }
    if (times.size() < 2 || times.size() != members.size()) continue;
    std::sort(times.begin(), times.end());
    const double gap = static_cast<double>(times.back().first - times[times.size() - 2].first) / 1e9;
    if (gap >= kLateS) lates.emplace_back(gap, seq, collective, times.back().second);
  }
  std::sort(lates.begin(), lates.end(),
            [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  if (lates.size() > kMaxLate) lates.resize(kMaxLate);
  std::sort(lates.begin(), lates.end(),
            [](const auto& a, const auto& b) { return std::get<1>(a) < std::get<1>(b); });
  for (const auto& [gap, seq, collective, rank] : lates) {
    late.push_back({{"seq", seq}, {"collective", collective}, {"rank", rank}, {"late_s", gap}});
    if (gap >= kLateFindingS)
      verdict.push_back(fmt::format("communicator {}: rank {} posted {} #{} {:.2f} s after the other ranks",
                                    comm, rank, collective, seq, gap));
  }
  out["late"] = late;
  return out;
}

// OP_RANK_CONSISTENCY's consistency.jsonl of one rank (untrusted: bounded lines and size, malformed lines
// skipped; the steps' end lines are not needed here).
consistency::Records readConsistency(const fs::path& file, std::size_t& malformed) {
  checkReadable(file, std::uintmax_t{1} << 30);
  std::ifstream in(file);
  consistency::Records out;
  std::string line;
  bool too_long = false;
  while (readBoundedLine(in, line, consistency::kMaxLineBytes, too_long) &&
         out.size() < (std::size_t{1} << 24)) {
    auto parsed = too_long ? consistency::Line{} : consistency::parseLine(line);
    if (auto* r = std::get_if<consistency::Record>(&parsed)) {
      const consistency::Key key{r->step, r->index};
      out[key] = std::move(*r);
    } else if (auto* h = std::get_if<consistency::Header>(&parsed)) {
      if (const std::string e =
              results::formatVersionError(consistency::kFile, h->format_version, consistency::kFormatVersion);
          !e.empty())
        throw std::runtime_error(e);
    } else if (!std::holds_alternative<consistency::StepEnd>(parsed)) {
      ++malformed;
    }
  }
  return out;
}

// Where the replicas first differ: the records of one (step, index) whose hashes do not all agree; the ranks
// unlike the most common hash are named, with the calls they kept for op-replay.
json checkConsistency(const std::vector<std::pair<int, consistency::Records>>& ranks,
                      const std::map<int, fs::path>& kept, std::vector<std::string>& verdict) {
  std::vector<std::pair<int, const consistency::Records*>> all;
  for (const auto& [rank, records] : ranks) all.emplace_back(rank, &records);
  const consistency::Comparison c = consistency::compare(all);
  json first = nullptr;
  if (c.first) {
    const consistency::Difference& d = *c.first;
    json kept_by = json::object();
    for (const auto& [rank, path] : kept) kept_by[std::to_string(rank)] = path.string();
    first = {{"step", d.record.step}, {"index", d.record.index}, {"kind", d.record.kind}, {"op", d.record.op},
             {"seq", d.record.seq},   {"ranks", d.ranks},        {"others", d.others},    {"kept", kept_by}};
    verdict.push_back(fmt::format("replicas differ first at step {}: {} ({} record(s) differ in all){}",
                                  d.record.step, consistency::describe(d), c.differing,
                                  kept.empty() ? "" : "; the call is kept for op-replay"));
  }
  json with = json::array();
  for (const auto& [rank, records] : ranks) with.push_back(rank);
  return {{"ranks", with}, {"records", c.compared}, {"differing", c.differing}, {"first", first}};
}

// OP_OVERFLOW_CHECK on every rank names, per rank, the first op that made NaN/Inf from finite inputs: on the
// rank where a NaN was born, not on the ranks it reached through a collective (their ops get it as input).
// Several ranks may each make one: they are ordered by the first collective after it (the one that carried
// it to the others: the rank's first communicator entry whose last op is at or after it), then by op number.
struct NanFirst {
  int rank = 0;
  std::string op;
  std::int64_t seq = 0;
  // A collective whose result held NaN/Inf when what the rank sent did not: (comm, its seq).
  std::optional<std::pair<std::string, std::int64_t>> collective;
  bool sent_changed = false;  // and what the rank sent to it went NaN/Inf during the transfer: its part
};

json nanOrigin(std::vector<NanFirst> firsts, const std::map<std::string, std::vector<Member>>& comms,
               std::vector<std::string>& verdict) {
  struct Carried {
    NanFirst first;
    std::optional<std::pair<std::string, const Entry*>> by;  // comm, entry
  };
  std::vector<Carried> all;
  for (const NanFirst& f : firsts) {
    Carried c{f, std::nullopt};
    if (f.collective) {  // it carried the NaN/Inf itself
      if (const auto it = comms.find(f.collective->first); it != comms.end()) {
        for (const Member& m : it->second) {
          const auto e = m.collectives.find(f.collective->second);
          if (m.rank == f.rank && e != m.collectives.end()) c.by = std::make_pair(it->first, &e->second);
        }
      }
      all.push_back(std::move(c));
      continue;
    }
    for (const auto& [comm, members] : comms) {
      for (const Member& m : members) {
        if (m.rank != f.rank) continue;
        for (const auto& [seq, e] : m.collectives) {
          if (e.op_seq < f.seq) continue;
          if (!c.by || e.seq < c.by->second->seq) c.by = std::make_pair(comm, &e);
          break;
        }
      }
    }
    all.push_back(std::move(c));
  }
  // By the collective that carried it; at the same one, an op that made it before the collective that
  // only passed it on.
  std::sort(all.begin(), all.end(), [](const Carried& a, const Carried& b) {
    const std::int64_t sa = a.by ? a.by->second->seq : INT64_MAX, sb = b.by ? b.by->second->seq : INT64_MAX;
    const bool ca = a.first.collective.has_value(), cb = b.first.collective.has_value();
    const bool pa = !a.first.sent_changed, pb = !b.first.sent_changed;  // a rank whose part it was first
    return std::tie(sa, ca, pa, a.first.seq, a.first.rank) < std::tie(sb, cb, pb, b.first.seq, b.first.rank);
  });
  json ranks = json::array();
  for (const Carried& c : all) {
    json j = {{"rank", c.first.rank},
              {"op", c.first.op},
              {"op_seq", c.first.seq},
              {"carried_by", nullptr},
              {"in_collective", c.first.collective.has_value()},
              {"sent_changed", c.first.sent_changed}};
    if (c.by)
      j["carried_by"] = {
          {"comm", c.by->first}, {"collective", c.by->second->collective}, {"seq", c.by->second->seq}};
    ranks.push_back(std::move(j));
  }
  const Carried& f = all.front();
  if (f.first.collective) {
    // Every rank that says so got NaN/Inf from a collective whose inputs it sent finite: no rank's op made
    // it.
    std::vector<int> who, parts;
    for (const Carried& c : all) {
      if (c.first.collective != f.first.collective) continue;
      who.push_back(c.first.rank);
      if (c.first.sent_changed) parts.push_back(c.first.rank);
    }
    std::sort(who.begin(), who.end());
    std::sort(parts.begin(), parts.end());
    if (!parts.empty()) {
      // What a rank sent went NaN/Inf while the transfer ran: its part was written then.
      verdict.push_back(fmt::format(
          "NaN/Inf first appeared in {} #{} on communicator {}, in the part of rank(s) {}: what it sent was "
          "finite when the collective was posted and held NaN/Inf once it had run (written during the "
          "transfer); the result carried it to rank(s) {}",
          f.first.op, f.first.collective->second, f.first.collective->first, rankList(parts), rankList(who)));
      return {{"ranks", ranks},
              {"first_rank", parts.front()},
              {"collective", {{"comm", f.first.collective->first}, {"seq", f.first.collective->second}}}};
    }
    verdict.push_back(
        fmt::format("NaN/Inf first appeared in the result of {} #{} on communicator {} on rank(s) {}, from "
                    "what they sent "
                    "finite: no rank's op made it before (it came from inside the collective, or from a rank "
                    "that did not "
                    "check)",
                    f.first.op, f.first.collective->second, f.first.collective->first, rankList(who)));
    return {{"ranks", ranks},
            {"first_rank", nullptr},
            {"collective", {{"comm", f.first.collective->first}, {"seq", f.first.collective->second}}}};
  }
  verdict.push_back(
      fmt::format("NaN/Inf first made on rank {} by {} #{}{}", f.first.rank, f.first.op, f.first.seq,
                  f.by ? fmt::format(" (the next collective, {} #{} on communicator {}, carried it to the "
                                     "other ranks)",
                                     f.by->second->collective, f.by->second->seq, f.by->first)
                       : std::string()));
  return {{"ranks", ranks}, {"first_rank", f.first.rank}};
}

// The steps of analyzeRanks(), in the order it takes them.

// What the rank directories hold, read one directory at a time.
struct FolderRead {
  std::vector<Dump> dumps;                                   // kept for the members' pointers
  std::map<int, std::size_t> dump_of;                        // each rank's dump in dumps
  std::vector<std::pair<int, consistency::Records>> hashes;  // OP_RANK_CONSISTENCY's records, by rank
  std::map<int, fs::path> kept;     // OP_RANK_CONSISTENCY's consistency_capture.db, by rank
  std::vector<NanFirst> nan_first;  // OP_OVERFLOW_CHECK's first NaN/Inf, by rank
  std::int64_t world = 0;
  json warnings = json::array();
};

std::optional<int> rankOf(const json& run) {
  const std::int64_t rank = integer(run, "rank").value_or(-1);
  if (rank < 0 || rank > (1 << 20)) return std::nullopt;
  return static_cast<int>(rank);
}

// OP_OVERFLOW_CHECK's finding in a rank's run.json: the first op that made NaN/Inf from finite inputs.
std::optional<NanFirst> overflowFinding(const json& run) {
  const std::optional<int> rank = rankOf(run);
  const json* first = nullptr;
  if (run.contains("findings") && run["findings"].is_object() && run["findings"].contains("overflow check")) {
    const json& o = run["findings"]["overflow check"];
    if (o.is_object() && o.contains("first") && o["first"].is_object()) first = &o["first"];
  }
  if (first == nullptr || !rank || integer(*first, "seq").value_or(-1) < 0) return std::nullopt;
  NanFirst f{*rank, text(*first, "op").substr(0, 64), integer(*first, "seq").value_or(0), std::nullopt};
  bool valid = f.seq > 0;
  if (const json& c = first->contains("collective") ? (*first)["collective"] : json(); c.is_object()) {
    const std::string comm = text(c, "comm");
    const std::int64_t seq = integer(c, "seq").value_or(0);
    valid = !comm.empty() && comm.size() <= 32 && seq > 0;
    f.collective = std::make_pair(comm, seq);
    f.sent_changed =
        c.contains("sent_changed") && c["sent_changed"].is_boolean() && c["sent_changed"].get<bool>();
  }
  if (!valid) return std::nullopt;
  return f;
}

// A rank's run.json: its world size and its overflow finding (a newer format is refused with a warning).
void readRunFile(const results::RankDirectory& rank_dir, FolderRead& read) {
  const json& run = rank_dir.run;
  if (const std::string e = results::formatVersionError("run.json", run, results::kRunFormatVersion);
      !e.empty()) {
    read.warnings.push_back(
        fmt::format("{}: {}; its findings are left out", rank_dir.dir.filename().string(), e));
    return;
  }
  try {
    read.world = std::max(read.world, integer(run, "world_size").value_or(0));
    if (std::optional<NanFirst> f = overflowFinding(run)) read.nan_first.push_back(std::move(*f));
  } catch (const std::exception&) {
    // not a run.json of this shape: its findings are not there to read
  }
}

// A rank's consistency.jsonl (OP_RANK_CONSISTENCY), and the capture it kept beside it.
void readConsistencyFile(const results::RankDirectory& rank_dir, FolderRead& read) {
  const fs::path& dir = rank_dir.dir;
  std::error_code ec;
  const fs::path c = dir / consistency::kFile;
  if (!fs::exists(c, ec)) return;
  try {
    std::size_t malformed = 0;
    consistency::Records records = readConsistency(c, malformed);
    if (const std::optional<int> rank = rankOf(rank_dir.run)) {
      read.hashes.emplace_back(*rank, std::move(records));
      if (const fs::path db = dir / "consistency_capture.db"; fs::is_regular_file(db, ec))
        read.kept[*rank] = db;
    }
    if (malformed > 0)
      read.warnings.push_back(fmt::format("{}: {} malformed line(s) of consistency.jsonl skipped",
                                          dir.filename().string(), malformed));
  } catch (const std::exception& e) {
    read.warnings.push_back(fmt::format("{}: {}", dir.filename().string(), e.what()));
  }
}

// A flight_recorder.json: its head as a tree, its comms' entries read one at a time into Entry (a dump is
// mostly entries, and a tree of them takes about nine times the file). Throws what is wrong with it.
Dump readDump(const fs::path& file) {
  Dump dump;
  dump.head = readJsonFile(file, kMaxDumpBytes, {"comms", "[]", "entries"},
                           [&dump](const std::vector<std::size_t>& at, json&& e) {
                             if (at.size() != 1 || at[0] > (std::size_t{1} << 16)) return;
                             if (dump.entries.size() <= at[0]) dump.entries.resize(at[0] + 1);
                             if (std::optional<Entry> x = entryOf(e))
                               dump.entries[at[0]].push_back(std::move(*x));
                           });
  const json& d = dump.head;
  if (!d.is_object() || text(d, "format") != results::kFlightRecorderFormat)
    throw std::runtime_error("flight_recorder.json: not a flight recorder dump");
  // (Dumps written before format_version was stored say "version".)
  std::string version_error =
      results::formatVersionError("flight_recorder.json", d, results::kFlightRecorderFormatVersion);
  if (const auto old = integer(d, "version");
      version_error.empty() && !d.contains(results::kFormatVersionKey) && old)
    version_error =
        results::formatVersionError("flight_recorder.json", *old, results::kFlightRecorderFormatVersion);
  if (!version_error.empty()) throw std::runtime_error(version_error);
  if (!rankOf(d)) throw std::runtime_error("flight_recorder.json: no rank");
  return dump;
}

// A rank's dump, if it wrote one; of two directories of one rank in one job (a restarted rank), the newest
// (the later name), as the report shows.
void readDumpFile(const results::RankDirectory& rank_dir, FolderRead& read) {
  const fs::path file = rank_dir.dir / results::kFlightRecorderFile;
  std::error_code ec;
  if (!fs::exists(file, ec)) return;
  try {
    Dump dump = readDump(file);
    const int rank = *rankOf(dump.head);
    read.world = std::max({read.world, integer(dump.head, "world_size").value_or(0), std::int64_t{rank} + 1});
    if (const auto at = read.dump_of.find(rank); at != read.dump_of.end()) {
      read.warnings.push_back(fmt::format("rank {} has more than one dump: the newest, {}'s, is used", rank,
                                          rank_dir.dir.filename().string()));
      read.dumps[at->second] = std::move(dump);
      return;
    }
    read.dump_of[rank] = read.dumps.size();
    read.dumps.push_back(std::move(dump));
  } catch (const std::exception& e) {
    read.warnings.push_back(fmt::format("{}: {}", rank_dir.dir.filename().string(), e.what()));
  }
}

// Each communicator as every rank's dump has it, with the dump's entries moved into its members (their
// times on the Unix clock); `sizes` gets each communicator's size.
std::map<std::string, std::vector<Member>> membersOf(std::vector<Dump>& dumps,
                                                     std::map<std::string, std::int64_t>& sizes) {
  std::map<std::string, std::vector<Member>> comms;
  for (Dump& dump : dumps) {
    const json& d = dump.head;
    const int rank = static_cast<int>(integer(d, "rank").value_or(0));
    const std::int64_t offset = nanoseconds(d, "dumped_unix_ns") - nanoseconds(d, "dumped_monotonic_ns");
    if (!d.contains("comms") || !d["comms"].is_array()) continue;
    for (std::size_t ci = 0; ci < d["comms"].size(); ++ci) {
      results::FlightRecorderComm c;
      results::fromJson(d["comms"][ci], c);
      const std::string& id = c.comm;
      if (id.empty() || id.size() > 32) continue;
      Member m;
      m.rank = rank;
      m.dump = &d;
      // Sequence numbers: clamped, so that the next one (+ 1) cannot overflow.
      const auto seqOf = [](std::int64_t seq) {
        return std::clamp<std::int64_t>(seq, 0, std::int64_t{1} << 62);
      };
      m.last_enqueued = seqOf(c.last_enqueued);
      m.last_started = seqOf(c.last_started);
      m.last_completed = seqOf(c.last_completed);
      m.error = c.error;
      m.wrapped = c.recorded > c.ring;
      sizes[id] = std::max(sizes[id], std::min<std::int64_t>(c.size, 1 << 20));
      if (ci < dump.entries.size()) {
        for (Entry& x : dump.entries[ci]) {
          if (x.calling_unix_ns) *x.calling_unix_ns += offset;
          if (x.enqueued_unix_ns) *x.enqueued_unix_ns += offset;
          if (isPointToPoint(x.kind)) {
            if (m.p2p.size() < (std::size_t{1} << 20)) m.p2p.push_back(std::move(x));
          } else {
            const std::int64_t seq = x.seq;
            m.collectives[seq] = std::move(x);
          }
        }
        dump.entries[ci].clear();
        dump.entries[ci].shrink_to_fit();
      }
      comms[id].push_back(std::move(m));
    }
  }
  return comms;
}

}  // namespace

json analyzeRanks(const fs::path& folder) {
  std::vector<std::string> folder_warnings;  // two jobs in the folder: which one is read
  const std::vector<results::RankDirectory> dirs = results::rankDirectories(folder, &folder_warnings);
  if (dirs.empty())
    throw AnalysisError(
        fmt::format("{}: no rank's result directory in it (a run folder holds "
                    "<stamp>-rank<R>-<pid>-XXXXXX directories)",
                    folder.string()));
  FolderRead read;
  read.warnings = folder_warnings;
  read.dumps.reserve(dirs.size());
  for (const results::RankDirectory& rank_dir : dirs) {
    readRunFile(rank_dir, read);
    readConsistencyFile(rank_dir, read);
    readDumpFile(rank_dir, read);
  }
  json& warnings = read.warnings;
  const std::int64_t world = std::min<std::int64_t>(read.world, 1 << 20);
  json missing = json::array();
  for (std::int64_t r = 0; r < world; ++r)
    if (!read.dump_of.contains(static_cast<int>(r))) missing.push_back(r);
  std::set<int> have;
  for (const auto& [rank, at] : read.dump_of) have.insert(rank);
  json model = {{"folder", folder.string()}, {"world_size", world}, {"dumps", have}, {"missing", missing}};

  std::map<std::string, std::int64_t> sizes;
  std::map<std::string, std::vector<Member>> comms = membersOf(read.dumps, sizes);
  std::vector<std::string> verdict;
  // No dump read (and no consistency record): nothing is known of the job, which is not a clean job (every
  // rank killed before it could dump, or every dump unreadable: the warnings say why).
  if (read.dumps.empty() && !read.hashes.empty()) {
    warnings.push_back(
        "no rank wrote a flight recorder dump: only the replicas' consistency records are checked");
  } else if (read.dumps.empty()) {
    verdict.push_back(fmt::format(
        "no flight recorder dump could be read ({} rank director{}{}): nothing is known of the job's "
        "collectives",
        dirs.size(), dirs.size() == 1 ? "y" : "ies",
        warnings.empty() ? "; no rank wrote one (killed, or OP_FLIGHT_RECORDER=0?)" : "; see the warnings"));
  }
  if (!missing.empty() && !read.dumps.empty())
    verdict.push_back(fmt::format("no dump from rank(s) {} (of {})", rankList(ranksOf(missing)), world));
  json out = json::array();
  for (auto& [id, members] : comms) out.push_back(analyzeComm(id, members, sizes[id], verdict));
  model["comms"] = out;
  model["consistency"] = read.hashes.empty() ? json() : checkConsistency(read.hashes, read.kept, verdict);
  model["nan_origin"] = read.nan_first.empty() ? json() : nanOrigin(read.nan_first, comms, verdict);
  model["warnings"] = warnings;
  model["verdict"] = verdict;
  return model;
}

std::string renderAnalysis(const json& m) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "opscope analyze: {}\n", m.value("folder", ""));
  fmt::format_to(it, "dumps: rank(s) [{}] of {}; missing: {}\n", rankList(ranksOf(m["dumps"])),
                 m.value("world_size", 0),
                 m["missing"].empty() ? std::string("none") : "[" + rankList(ranksOf(m["missing"])) + "]");
  for (const json& c : m["comms"]) {
    fmt::format_to(it, "communicator {} ({} ranks; dumps of {})\n", c.value("comm", ""), c.value("size", 0),
                   c["ranks"].dump());
    for (const json& r : c["per_rank"]) {
      fmt::format_to(it, "  rank {}: last enqueued #{}, started #{}, completed #{}{}\n", r.value("rank", -1),
                     r.value("last_enqueued", 0), r.value("last_started", 0), r.value("last_completed", 0),
                     r["error"].is_string() ? "; error: " + r["error"].get<std::string>() : std::string());
    }
    if (const json& f = c["first_incomplete"]; f.is_object()) {
      fmt::format_to(it, "  first collective not completed by every rank: {} #{}{}\n",
                     f.value("collective", "?"), f.value("seq", 0),
                     f.contains("count")
                         ? fmt::format(" ({} x {}{})", f.value("count", 0), f.value("dtype", ""),
                                       f.contains("op") ? ", " + f.value("op", "") : "")
                         : std::string());
      if (f.contains("issued_by") && f["issued_by"].is_string())
        fmt::format_to(it, "    issued by the program's {}\n", f["issued_by"].get<std::string>());
      for (const json& n : f["never_enqueued"]) {
        if (n.value("in_call", false)) {
          fmt::format_to(it, "    rank {}: never enqueued it: its host call never returned, in:\n",
                         n.value("rank", -1));
        } else {
          const json& l = n["last"];
          fmt::format_to(
              it, "    rank {}: never enqueued it (its code did not reach it); its last collective: {}\n",
              n.value("rank", -1),
              l.is_object() ? fmt::format("{} #{} ({}{}), from:", l.value("collective", ""),
                                          l.value("seq", 0), l.value("state", ""),
                                          l.contains("issued_by") && l["issued_by"].is_string()
                                              ? "; issued by " + l["issued_by"].get<std::string>()
                                              : std::string())
                            : std::string("none"));
        }
        for (const json& frame : n["backtrace"]) fmt::format_to(it, "        {}\n", frame.get<std::string>());
      }
      for (const json& w : f["not_completed"]) {
        fmt::format_to(it, "    rank {}: {}, not completed{}\n", w.value("rank", -1), w.value("state", ""),
                       w["waiting_s"].is_number()
                           ? fmt::format(" (for {:.1f} s when dumped)", w["waiting_s"].get<double>())
                           : std::string());
      }
      for (const json& x : f["failed"])
        fmt::format_to(it, "    rank {}: {}{}\n", x.value("rank", -1), x.value("state", ""),
                       x["error"].is_string() ? ": " + x["error"].get<std::string>() : std::string());
      if (!f["completed"].empty()) fmt::format_to(it, "    completed by rank(s) {}\n", f["completed"].dump());
    } else {
      out += "  every rank completed every collective it recorded\n";
    }
    if (c["mismatches"].empty()) {
      out += "  mismatches across ranks: none\n";
    } else {
      fmt::format_to(it, "  mismatches across ranks ({}):\n", c["mismatches"].size());
      for (const json& x : c["mismatches"]) {
        // "allreduce #2: ...", or the check's text alone when it names no transfer of its own
        std::string at = x["collective"].is_string() ? x["collective"].get<std::string>() : "";
        if (x["seq"].is_number_integer())
          at += fmt::format("{}#{}", at.empty() ? "" : " ", x["seq"].get<std::int64_t>());
        fmt::format_to(it, "    {}{}\n", at.empty() ? "" : at + ": ", x.value("what", ""));
      }
    }
    for (const json& l : c["late"])
      fmt::format_to(it, "  late: rank {} posted {} #{} {:.2f} s after the other ranks\n",
                     l.value("rank", -1), l.value("collective", ""), l.value("seq", 0),
                     l.value("late_s", 0.0));
  }
  if (const json& n = m["nan_origin"]; n.is_object()) {
    out +=
        "NaN/Inf made from finite inputs (OP_OVERFLOW_CHECK), in the order the collectives carried them:\n";
    for (const json& r : n["ranks"]) {
      if (r.value("in_collective", false) && r["carried_by"].is_object()) {
        fmt::format_to(it, "  rank {}: in the result of {} #{} ({})\n", r.value("rank", -1),
                       r["carried_by"].value("collective", ""), r["carried_by"].value("seq", 0),
                       r.value("sent_changed", false)
                           ? "its own part: what it sent went NaN/Inf during the transfer"
                           : "what it sent was finite");
        continue;
      }
      fmt::format_to(
          it, "  rank {}: {} #{}{}\n", r.value("rank", -1), r.value("op", ""), r.value("op_seq", 0),
          r["carried_by"].is_object() ? fmt::format(", then {} #{}", r["carried_by"].value("collective", ""),
                                                    r["carried_by"].value("seq", 0))
                                      : std::string());
    }
  }
  if (const json& c = m["consistency"]; c.is_object()) {
    fmt::format_to(it, "consistency (OP_RANK_CONSISTENCY) of ranks [{}]: {} record(s) compared, {} differ\n",
                   rankList(ranksOf(c["ranks"])), c.value("records", 0), c.value("differing", 0));
    if (c["first"].is_object() && c["first"]["kept"].is_object()) {
      for (const auto& [rank, path] : c["first"]["kept"].items())
        if (path.is_string())
          fmt::format_to(it, "  rank {} kept the call: op-replay {}\n", rank, path.get<std::string>());
    }
  }
  for (const json& w : m["warnings"]) fmt::format_to(it, "warning: {}\n", w.get<std::string>());
  if (m["verdict"].empty()) {
    out += "verdict: no hang, failure or mismatch in the dumps\n";
  } else {
    out += "verdict:\n";
    for (const json& v : m["verdict"]) fmt::format_to(it, "  {}\n", v.get<std::string>());
  }
  return out;
}

}  // namespace opscope::analysis
