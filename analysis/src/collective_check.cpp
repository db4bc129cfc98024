#include <opscope/analysis/collective_check.h>

#include <opscope/results/capture_db.h>

#include <opscope/bytes.h>
#include <opscope/op_call.h>
#include <opscope/tensor_snapshot.h>
#include <opscope/tolerance.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

namespace opscope::analysis {

using results::CaptureDb;
using results::columnText;

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::size_t kMaxListed = 100;  // mismatches listed in the model (all are counted)
// A transfer's buffers past this many bytes on one rank are checked by checksum only (the check holds every
// rank's send and recv in memory at once).
constexpr std::int64_t kMaxCheckedBytes = std::int64_t{256} << 20;

// A buffer row of collective_buffers.
struct Buffer {
  std::string dtype;
  std::int64_t numel = 0;
  std::int64_t nan = 0;
  std::string checksum;
  std::int64_t nbytes = 0;
  std::optional<std::int64_t> blob;
};

// A row of collectives, with its buffers.
struct Call {
  std::size_t capture = 0;  // index into the captures
  std::string comm;
  std::int64_t seq = 0;
  std::string name;
  Collective kind = Collective::kCount;  // of name (kCount: a name that is none of libmlucl's)
  std::int64_t rank = -1, world = 0, count = 0, peer = -1, status = 0;
  std::string dtype, op;
  std::optional<Buffer> send, recv;
};

// A capture's transfers (empty when it has no collectives table: made before they were captured).
std::vector<Call> readCalls(CaptureDb& db, std::size_t index) {
  bool has_tables = false;
  db.query(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('collectives', "
      "'collective_buffers')",
      [&](sqlite3_stmt* s) { has_tables = sqlite3_column_int64(s, 0) == 2; });
  if (!has_tables) return {};
  std::vector<Call> calls;
  std::map<std::int64_t, std::size_t> by_id;
  db.query(
      "SELECT collective_id, comm, seq, name, rank, world_size, count, dtype, op, peer, status FROM "
      "collectives ORDER BY collective_id",
      [&](sqlite3_stmt* s) {
        Call c;
        c.capture = index;
        c.comm = columnText(s, 1);
        c.seq = sqlite3_column_int64(s, 2);
        c.name = columnText(s, 3);
        c.kind = parseCollective(c.name);
        c.rank = sqlite3_column_int64(s, 4);
        c.world = sqlite3_column_int64(s, 5);
        c.count = sqlite3_column_int64(s, 6);
        c.dtype = columnText(s, 7);
        c.op = columnText(s, 8);
        c.peer = sqlite3_column_int64(s, 9);
        c.status = sqlite3_column_int64(s, 10);
        by_id[sqlite3_column_int64(s, 0)] = calls.size();
        calls.push_back(std::move(c));
      });
  db.query("SELECT collective_id, role, dtype, numel, nan, checksum, nbytes, blob_id FROM collective_buffers",
           [&](sqlite3_stmt* s) {
             const auto it = by_id.find(sqlite3_column_int64(s, 0));
             if (it == by_id.end()) return;
             Buffer b;
             b.dtype = columnText(s, 2);
             b.numel = sqlite3_column_int64(s, 3);
             b.nan = sqlite3_column_int64(s, 4);
             b.checksum = columnText(s, 5);
             b.nbytes = sqlite3_column_int64(s, 6);
             if (sqlite3_column_type(s, 7) != SQLITE_NULL) b.blob = sqlite3_column_int64(s, 7);
             const std::string role = columnText(s, 1);
             Call& c = calls[it->second];
             if (role == "send") c.send = std::move(b);
             if (role == "recv") c.recv = std::move(b);
           });
  return calls;
}

// The transfer a call belongs to: the communicator's collectives by seq; a send and its recv by the pair
// of ranks and the pair's own numbers.
std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t> transferKey(const Call& c) {
  if (c.kind == Collective::kSend) return {c.comm, c.rank, c.peer, c.seq};
  if (c.kind == Collective::kRecv) return {c.comm, c.peer, c.rank, c.seq};
  return {c.comm, -1, -1, c.seq};
}

// Integer reductions wrap around in the dtype as MPI's do.
std::int64_t wrapTo(mluopDataType_t dtype, std::int64_t v) {
  switch (dtype) {
    case MLUOP_DTYPE_INT8:
      return static_cast<std::int8_t>(static_cast<std::uint8_t>(v & 0xff));
    case MLUOP_DTYPE_INT16:
      return static_cast<std::int16_t>(static_cast<std::uint16_t>(v & 0xffff));
    case MLUOP_DTYPE_INT32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(v & 0xffffffff));
    case MLUOP_DTYPE_UINT8:
      return v & 0xff;
    default:
      return v;
  }
}

std::int64_t elementAsInt(mluopDataType_t dtype, const std::byte* p, std::size_t i) {
  switch (dtype) {
    case MLUOP_DTYPE_INT64: {
      std::int64_t v;
      std::memcpy(&v, p + i * 8, 8);
      return v;
    }
    default:
      return static_cast<std::int64_t>(elementAsDouble(dtype, p, i));
  }
}

// The unit roundoff the library's arithmetic has for a dtype (float16 and bfloat16 reduce in float32).
double roundoff(mluopDataType_t dtype) { return dtype == MLUOP_DTYPE_DOUBLE ? 0x1p-53 : 0x1p-24; }

class Checker {
 public:
  explicit Checker(std::vector<std::unique_ptr<CaptureDb>>& dbs) : dbs_(dbs) {}

  json run(std::map<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>, std::vector<Call>>&
               transfers) {
    // In sequence order per communicator (the map's order: comm, then the pair, then seq).
    std::vector<const std::vector<Call>*> order;
    for (const auto& [key, calls] : transfers) order.push_back(&calls);
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      return std::tie(a->front().comm, a->front().seq) < std::tie(b->front().comm, b->front().seq);
    });
    for (const auto* calls : order) check(*calls);
    json not_checked = json::object();
    for (const auto& [reason, n] : not_checked_) not_checked[reason] = n;
    return {{"transfers", transfers.size()}, {"checked", by_contents_ + by_statistics_},
            {"by_contents", by_contents_},   {"by_statistics", by_statistics_},
            {"mismatching", mismatching_},   {"not_checked", not_checked},
            {"mismatches", mismatches_},     {"mismatches_left_out", left_out_}};
  }

 private:
  void skip(const std::string& reason) { ++not_checked_[reason]; }

  void mismatch(const Call& c, std::int64_t rank, const std::string& what) {
    if (mismatches_.size() >= kMaxListed) {
      ++left_out_;
      return;
    }
    mismatches_.push_back({{"comm", c.comm},
                           {"collective", isPointToPoint(c.kind) ? "send/recv" : c.name},
                           {"seq", c.seq},
                           {"rank", rank},
                           {"what", what}});
  }

  // The contents of a buffer, or nullopt when its blob is missing or not the size its row says.
  std::optional<Bytes> contents(const Call& c, const Buffer& b) {
    if (!b.blob) return std::nullopt;
    std::optional<Bytes> out;
    CaptureDb& db = *dbs_[c.capture];
    db.renewDeadline();
    db.query(fmt::format("SELECT data FROM blobs WHERE blob_id = {}", *b.blob), [&](sqlite3_stmt* s) {
      const auto n = static_cast<std::int64_t>(sqlite3_column_bytes(s, 0));
      if (n != b.nbytes) return;
      const auto* p = static_cast<const std::byte*>(sqlite3_column_blob(s, 0));
      out = Bytes(p, p + n);
    });
    return out;
  }

  void check(const std::vector<Call>& calls) {
    const Call& first = calls.front();
    if (first.seq <= 0) return skip("refused by the library (no sequence number)");
    if (first.kind == Collective::kBarrier) return skip("barriers (no data)");
    if (isPointToPoint(first.kind)) return checkPair(calls);
    // One call per rank of the communicator, all alike.
    std::map<std::int64_t, const Call*> by_rank;
    for (const Call& c : calls) by_rank.emplace(c.rank, &c);
    bool disagree = false;
    for (const auto& [rank, c] : by_rank) {
      std::vector<std::string> differ;
      if (c->name != first.name)
        differ.push_back(fmt::format("{} where rank {} made {}", c->name, first.rank, first.name));
      if (c->world != first.world)
        differ.push_back(
            fmt::format("world size {} where rank {} has {}", c->world, first.rank, first.world));
      if (c->count != first.count)
        differ.push_back(fmt::format("count {} where rank {} has {}", c->count, first.rank, first.count));
      if (c->dtype != first.dtype)
        differ.push_back(fmt::format("dtype {} where rank {} has {}", c->dtype, first.rank, first.dtype));
      if (c->op != first.op)
        differ.push_back(fmt::format("op {} where rank {} has {}", c->op, first.rank, first.op));
      if (c->kind == Collective::kBroadcast && c->peer != first.peer)
        differ.push_back(fmt::format("root {} where rank {} has {}", c->peer, first.rank, first.peer));
      if (!differ.empty()) {
        std::string what = "its call differs: ";
        for (std::size_t i = 0; i < differ.size(); ++i) what += (i ? ", " : "") + differ[i];
        mismatch(*c, rank, what);
        disagree = true;
      }
    }
    if (disagree) {
      ++mismatching_;
      return;
    }
    const std::int64_t world = first.world;
    if (world <= 0 || world > (1 << 20) || first.count < 0 || first.count > (std::int64_t{1} << 40))
      return skip("damaged rows (world size or count out of range)");
    if (static_cast<std::int64_t>(by_rank.size()) < world || by_rank.begin()->first != 0 ||
        by_rank.rbegin()->first != world - 1)
      return skip("not every rank's capture has it (a rank without capture.db, or capture stopped)");
    for (const auto& [rank, c] : by_rank) {
      if (c->status != 0) return skip("refused on a rank");
    }
    const mluopDataType_t dtype = mlu::dtypeOfName(first.dtype);
    if (dtype == MLUOP_DTYPE_INVALID) return skip("damaged rows (unknown dtype)");
    const std::int64_t n = first.count;
    const std::int64_t w = world;
    // The elements each rank sends and receives.
    std::int64_t send_numel = n, recv_numel = n;
    if (first.kind == Collective::kAllGather) recv_numel = n * w;
    if (first.kind == Collective::kReduceScatter) send_numel = n * w;
    const bool reduces = first.kind == Collective::kAllReduce || first.kind == Collective::kReduceScatter;
    const auto root = first.kind == Collective::kBroadcast ? first.peer : -1;
    const std::int64_t elem = static_cast<std::int64_t>(mlu::dtypeSize(dtype));
    // What the check needs of each rank: its recv, and its send unless a broadcast's non-root.
    for (const auto& [rank, c] : by_rank) {
      const bool needs_send = first.kind != Collective::kBroadcast || rank == root;
      if (!c->recv || (needs_send && !c->send)) return skip("buffers not captured (not in device memory)");
      const auto fits = [&](const Buffer& b, std::int64_t numel) {
        return b.numel == numel && b.dtype == first.dtype && (!b.blob || b.nbytes == numel * elem);
      };
      if (!fits(*c->recv, recv_numel) || (needs_send && !fits(*c->send, send_numel)))
        return skip("damaged rows (buffer sizes do not match the call)");
    }
    bool have_contents = (send_numel + recv_numel) * elem <= kMaxCheckedBytes;
    std::map<std::int64_t, Bytes> sends, recvs;
    for (const auto& [rank, c] : by_rank) {
      if (!have_contents) break;
      auto r = contents(*c, *c->recv);
      std::optional<Bytes> s;
      if (first.kind != Collective::kBroadcast || rank == root) s = contents(*c, *c->send);
      if (!r || ((first.kind != Collective::kBroadcast || rank == root) && !s)) {
        have_contents = false;
        break;
      }
      recvs[rank] = std::move(*r);
      if (s) sends[rank] = std::move(*s);
    }
    if (!have_contents) {
      sends.clear();
      recvs.clear();
      return checkByChecksums(first, by_rank, root);
    }
    ++by_contents_;
    if (!reduces) return checkCopies(first, sends, recvs, root, n, elem);
    checkReduction(first, dtype, sends, recvs, n, w);
  }

  // broadcast, allgather: the bytes every rank received are the root's, or all the ranks' in rank order.
  void checkCopies(const Call& c, const std::map<std::int64_t, Bytes>& sends,
                   const std::map<std::int64_t, Bytes>& recvs, std::int64_t root, std::int64_t n,
                   std::int64_t elem) {
    Bytes expected;
    if (c.kind == Collective::kBroadcast) {
      expected = sends.at(root);
    } else {
      for (const auto& [rank, s] : sends) expected.insert(expected.end(), s.begin(), s.end());
    }
    bool bad = false;
    for (const auto& [rank, r] : recvs) {
      if (r == expected) continue;
      std::size_t at = 0;
      while (at < r.size() && r[at] == expected[at]) ++at;
      const auto element = static_cast<std::int64_t>(at) / elem;
      mismatch(c, rank,
               c.kind == Collective::kBroadcast
                   ? fmt::format("received other bytes than root {} sent (first at element {} of {})", root,
                                 element, n)
                   : fmt::format("received other bytes than the ranks sent (first at element {}: rank {}'s "
                                 "element {})",
                                 element, element / std::max<std::int64_t>(n, 1),
                                 element % std::max<std::int64_t>(n, 1)));
      bad = true;
    }
    if (bad) ++mismatching_;
  }

  void checkReduction(const Call& c, mluopDataType_t dtype, const std::map<std::int64_t, Bytes>& sends,
                      const std::map<std::int64_t, Bytes>& recvs, std::int64_t n, std::int64_t w) {
    const bool scatter = c.kind == Collective::kReduceScatter;
    const bool integer = !mlu::isFloating(dtype);
    const Tolerance tol = defaultTolerance(dtype);
    const double u = roundoff(dtype);
    bool bad = false;
    for (const auto& [rank, r] : recvs) {
      const std::size_t offset = scatter ? static_cast<std::size_t>(rank * n) : 0;
      std::int64_t differ = 0, first = -1;
      double got_first = 0, want_first = 0, worst = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::size_t at = offset + static_cast<std::size_t>(i);
        double want = 0, got = elementAsDouble(dtype, r.data(), static_cast<std::size_t>(i)), bound = 0;
        if (integer) {
          std::int64_t acc = c.op == "prod" ? 1 : 0;
          bool started = false;
          for (const auto& [q, s] : sends) {
            const std::int64_t x = elementAsInt(dtype, s.data(), at);
            if (c.op == "sum" || c.op == "avg")
              acc =
                  static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(x));
            else if (c.op == "prod")
              acc =
                  static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) * static_cast<std::uint64_t>(x));
            else if (c.op == "max")
              acc = started ? std::max(acc, x) : x;
            else
              acc = started ? std::min(acc, x) : x;
            started = true;
            acc = wrapTo(dtype, acc);
          }
          if (c.op == "avg") acc /= w;
          if (dtype == MLUOP_DTYPE_BOOL) acc = acc != 0 ? 1 : 0;
          const std::int64_t have = elementAsInt(dtype, r.data(), static_cast<std::size_t>(i));
          if (have == acc) continue;
          want = static_cast<double>(acc);
          got = static_cast<double>(have);
        } else {
          double acc = c.op == "prod" ? 1 : 0, magnitude = 0;
          bool started = false;
          for (const auto& [q, s] : sends) {
            const double x = elementAsDouble(dtype, s.data(), at);
            if (c.op == "sum" || c.op == "avg")
              acc += x;
            else if (c.op == "prod")
              acc *= x;
            else if (c.op == "max")
              acc = started ? std::max(acc, x) : x;
            else
              acc = started ? std::min(acc, x) : x;
            if (std::isnan(x)) acc = x;
            magnitude += std::fabs(x);
            started = true;
          }
          if (c.op == "avg") {
            acc /= static_cast<double>(w);
            magnitude /= static_cast<double>(w);
          }
          want = acc;
          if (std::isnan(want) && std::isnan(got)) continue;
          if (c.op == "max" || c.op == "min") {
            // The result is one of the inputs, rounded to the dtype: exact.
            if (got == want) continue;
          } else {
            // A sum of w terms in any order errs by at most (w - 1) u sum|x| (a product by (w - 1) u |p|),
            // plus one rounding of the result (avg's division, float16's and bfloat16's narrowing is in the
            // dtype's rtol).
            const double terms = c.op == "prod" ? std::fabs(want) : magnitude;
            const double rounding = 1.01 * (static_cast<double>(w - 1) * u * terms + u * std::fabs(want));
            bound = tol.atol + tol.rtol * std::fabs(want) + rounding;
            if (std::isfinite(got) && std::isfinite(want) && std::fabs(got - want) <= bound) continue;
            if (std::isinf(got) && got == want) continue;
          }
        }
        ++differ;
        if (first < 0) {
          first = i;
          got_first = got;
          want_first = want;
        }
        if (std::isfinite(got) && std::isfinite(want)) worst = std::max(worst, std::fabs(got - want));
      }
      if (differ == 0) continue;
      bad = true;
      mismatch(c, rank,
               fmt::format("{} of {} elements differ from the {} of the ranks' inputs (computed in float64); "
                           "first at element {}: received {:.9g}, expected {:.9g}{}",
                           differ, n, c.op, first, got_first, want_first,
                           worst > 0 ? fmt::format("; max |diff| {:.3g}", worst) : std::string()));
    }
    if (bad) ++mismatching_;
  }

  // Statistics only: no rank received a NaN that no rank sent, the ranks received the same bytes (not a
  // reduce-scatter's: each rank's part differs), and a broadcast's root sent them.
  void checkByChecksums(const Call& c, const std::map<std::int64_t, const Call*>& by_rank,
                        std::int64_t root) {
    ++by_statistics_;
    std::int64_t sent_nan = 0;
    for (const auto& [rank, call] : by_rank)
      sent_nan += call->send ? std::max<std::int64_t>(call->send->nan, 0) : 0;
    if (sent_nan == 0) {
      bool bad = false;
      for (const auto& [rank, call] : by_rank) {
        if (call->recv->nan <= 0) continue;
        mismatch(c, rank, fmt::format("received {} NaN though no rank's input held one", call->recv->nan));
        bad = true;
      }
      if (bad) {
        ++mismatching_;
        return;
      }
    }
    if (c.kind == Collective::kReduceScatter) return;
    std::string expected;
    if (c.kind == Collective::kBroadcast) {
      expected = by_rank.at(root)->send->checksum;
    } else {
      std::map<std::string, std::int64_t> votes;  // the checksum most ranks received
      for (const auto& [rank, call] : by_rank) ++votes[call->recv->checksum];
      expected = std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) {
                   return a.second < b.second;
                 })->first;
    }
    bool bad = false;
    for (const auto& [rank, call] : by_rank) {
      if (call->recv->checksum == expected) continue;
      bad = true;
      mismatch(
          c, rank,
          c.kind == Collective::kBroadcast
              ? fmt::format("received other bytes than root {} sent (checksum {} vs {})", root,
                            call->recv->checksum, expected)
              : fmt::format("received other bytes than the other ranks (checksum {} vs {}{})",
                            call->recv->checksum, expected,
                            call->recv->nan > 0 ? fmt::format(", {} NaN", call->recv->nan) : std::string()));
    }
    if (bad) ++mismatching_;
  }

  // A send and its recv: the receiver got the sender's bytes.
  void checkPair(const std::vector<Call>& calls) {
    const Call* send = nullptr;
    const Call* recv = nullptr;
    for (const Call& c : calls) (c.kind == Collective::kSend ? send : recv) = &c;
    if (send == nullptr || recv == nullptr)
      return skip("not every rank's capture has it (a rank without capture.db, or capture stopped)");
    if (send->status != 0 || recv->status != 0) return skip("refused on a rank");
    if (send->count < 0 || send->count > (std::int64_t{1} << 40))
      return skip("damaged rows (world size or count out of range)");
    if (send->count != recv->count || send->dtype != recv->dtype) {
      ++mismatching_;
      mismatch(*recv, recv->rank,
               fmt::format("receives {} x {} where rank {} sends {} x {}", recv->count, recv->dtype,
                           send->rank, send->count, send->dtype));
      return;
    }
    if (!send->send || !recv->recv) return skip("buffers not captured (not in device memory)");
    const mluopDataType_t dtype = mlu::dtypeOfName(send->dtype);
    const auto bytes = static_cast<std::int64_t>(mlu::dtypeSize(dtype)) * send->count;
    if (dtype == MLUOP_DTYPE_INVALID || send->send->numel != send->count ||
        recv->recv->numel != recv->count || (send->send->blob && send->send->nbytes != bytes) ||
        (recv->recv->blob && recv->recv->nbytes != bytes))
      return skip("damaged rows (buffer sizes do not match the call)");
    std::optional<Bytes> a, b;
    if (send->send->nbytes <= kMaxCheckedBytes) {
      a = contents(*send, *send->send);
      if (a) b = contents(*recv, *recv->recv);
    }
    if (a && b) {
      ++by_contents_;
      if (*a == *b) return;
    } else {
      ++by_statistics_;
      if (send->send->checksum == recv->recv->checksum) return;
    }
    ++mismatching_;
    mismatch(*recv, recv->rank, fmt::format("received other bytes than rank {} sent", send->rank));
  }

  std::vector<std::unique_ptr<CaptureDb>>& dbs_;
  std::map<std::string, std::int64_t> not_checked_;
  std::int64_t by_contents_ = 0, by_statistics_ = 0, mismatching_ = 0, left_out_ = 0;
  json mismatches_ = json::array();
};

}  // namespace

json checkCollectives(const std::vector<RankCapture>& captures) {
  std::vector<std::unique_ptr<CaptureDb>> dbs(captures.size());
  std::map<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>, std::vector<Call>> transfers;
  json with = json::array();
  json errors = json::array();
  for (std::size_t i = 0; i < captures.size(); ++i) {
    std::error_code ec;
    if (!fs::is_regular_file(captures[i].db, ec)) continue;
    try {
      dbs[i] = std::make_unique<CaptureDb>(captures[i].db);
      std::vector<Call> calls = readCalls(*dbs[i], i);
      if (calls.empty()) continue;
      with.push_back(captures[i].rank);
      for (Call& c : calls) transfers[transferKey(c)].push_back(std::move(c));
    } catch (const std::exception& e) {
      errors.push_back(fmt::format("rank {}: {}", captures[i].rank, e.what()));
      dbs[i].reset();
    }
  }
  if (transfers.empty() && errors.empty()) return nullptr;
  json model;
  try {
    model = Checker(dbs).run(transfers);
  } catch (const std::exception& e) {
    errors.push_back(e.what());
    model = json::object();
  }
  model["ranks_with_collectives"] = with;
  model["errors"] = errors;
  return model;
}

}  // namespace opscope::analysis
