// OP_RANK_CONSISTENCY's records (opscope/consistency.h): lines parsed back from untrusted files, the ranks'
// records compared by hand-worked cases, lines split out of a file read piece by piece.
#include <opscope/consistency.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace opscope::consistency {
namespace {

using ::testing::ElementsAre;

TEST(Consistency, RecordsAndStepEndsParseBack) {
  const auto r = parseLine(
      R"({"step":3,"index":17,"kind":"param","op":"adamw_step","seq":120,"bytes":4096,"hash":"00ff00ff00ff00ff"})");
  ASSERT_TRUE(std::holds_alternative<Record>(r));
  const Record& rec = std::get<Record>(r);
  EXPECT_EQ(rec.step, 3);
  EXPECT_EQ(rec.index, 17);
  EXPECT_EQ(rec.seq, 120);
  EXPECT_EQ(rec.kind, "param");
  EXPECT_EQ(rec.op, "adamw_step");
  EXPECT_EQ(rec.hash, "00ff00ff00ff00ff");
  const auto e = parseLine(R"({"step":3,"records":40})");
  ASSERT_TRUE(std::holds_alternative<StepEnd>(e));
  EXPECT_EQ(std::get<StepEnd>(e).step, 3);
  EXPECT_EQ(std::get<StepEnd>(e).records, 40);
}

// Format 2: a record may say where in the program its op ran. What the recorder writes reads back, a where
// with quotes, backslashes or control characters written with '?' in their place and cut to its bound.
TEST(Consistency, AWhereWrittenReadsBackMadeSafe) {
  const std::string line =
      recordLine(2, 5, "param", "sqrt", "aten::sqrt_ in Optimizer.step#Adadelta.step at main.py:86 in train",
                 75, 1152, "a710a1c4d24fff38");
  EXPECT_EQ(
      line,
      R"({"step":2,"index":5,"kind":"param","op":"sqrt","where":"aten::sqrt_ in Optimizer.step#Adadelta.step )"
      R"(at main.py:86 in train","seq":75,"bytes":1152,"hash":"a710a1c4d24fff38"})"
      "\n");
  const auto r = parseLine(std::string_view(line).substr(0, line.size() - 1));
  ASSERT_TRUE(std::holds_alternative<Record>(r));
  EXPECT_EQ(std::get<Record>(r).where, "aten::sqrt_ in Optimizer.step#Adadelta.step at main.py:86 in train");
  EXPECT_EQ(std::get<Record>(r).seq, 75);
  Difference d{std::get<Record>(r), {1}, {0}};
  EXPECT_EQ(describe(d),
            "the parameters written by sqrt #75 (record 5 of the step; in the program: aten::sqrt_ in "
            "Optimizer.step#Adadelta.step at main.py:86 in train) on rank(s) 1, unlike rank(s) 0");
  // Without a where, format 1's line exactly.
  EXPECT_EQ(recordLine(0, 1, "grad", "allreduce", "", 4, 8, "ab"),
            "{\"step\":0,\"index\":1,\"kind\":\"grad\",\"op\":\"allreduce\",\"seq\":4,\"bytes\":8,\"hash\":"
            "\"ab\"}\n");
  const std::string hostile =
      recordLine(0, 0, "param", "x", std::string("a\"b\\c\nd\x01") + std::string(2000, 'w'), 1, 4, "ab");
  const auto h = parseLine(std::string_view(hostile).substr(0, hostile.size() - 1));
  ASSERT_TRUE(std::holds_alternative<Record>(h)) << hostile;
  EXPECT_EQ(std::get<Record>(h).where.substr(0, 9), "a?b?c?d?w");
  EXPECT_EQ(std::get<Record>(h).where.size(), kMaxWhereBytes);
}

// Anything but the recorder's exact layout: other key orders, escapes, trailing bytes, numbers past 18
// digits.
TEST(Consistency, MalformedLinesAreNeither) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& line :
       {std::string(""),
        std::string("not json"),
        std::string("[1,2]"),
        std::string(R"({"step":-1,"records":2})"),
        std::string(R"({"step":1,"records":-2})"),
        std::string(R"({"step":"1","records":2})"),
        std::string(R"({"step":1.5,"records":2})"),
        std::string(R"({"step":18446744073709551615,"records":1})"),
        std::string(R"({"step":1,"index":2,"kind":"param","op":"x"})"),  // no hash
        std::string(R"({"step":1,"index":2,"kind":"param","op":"x","hash":""})"),
        std::string(R"({"step":1,"index":2,"kind":"param","op":"x","hash":")") + std::string(33, 'a') + "\"}",
        deep,
        std::string(R"({"index":2,"step":1,"kind":"param","op":"x","seq":1,"bytes":4,"hash":"ab"})"),
        std::string(R"({"step":1,"index":2,"kind":"param","op":"x\"y","seq":1,"bytes":4,"hash":"ab"})"),
        std::string(R"({"step":1,"index":2,"kind":"param","op":"x","seq":1,"bytes":4,"hash":"ab"} )"),
        std::string(R"({"step":1,"index":2,"kind":"param","op":"x","seq":1,"bytes":4,"hash":"ab"})") + '\0',
        std::string(R"({"step":1234567890123456789,"records":1})"),
        std::string(
            R"({"step":1,"index":2,"kind":"param","op":"x","where":"","seq":1,"bytes":4,"hash":"ab"})"),
        std::string(
            R"({"step":1,"index":2,"kind":"param","op":"x","where":"a\"b","seq":1,"bytes":4,"hash":"ab"})"),
        std::string(R"({"step":1,"index":2,"kind":"param","op":"x","where":")") + std::string(600, 'w') +
            R"(","seq":1,"bytes":4,"hash":"ab"})",
        std::string(
            R"({"step":1,"index":2,"kind":"param","op":"x","seq":1,"where":"w","bytes":4,"hash":"ab"})"),
        R"({"step":1,"index":2,"kind":"param","op":")" + std::string(5000, 'o') + R"(","hash":"ab"})"}) {
    EXPECT_TRUE(std::holds_alternative<std::monostate>(parseLine(line))) << line.substr(0, 120);
  }
}

Records records(std::vector<std::tuple<std::int64_t, std::int64_t, std::string>> rows) {
  Records out;
  for (auto& [step, index, hash] : rows)
    out[{step, index}] = Record{step, index, 10 * index, "param", "adamw_step", hash, ""};
  return out;
}

// Four ranks; at (0,1) rank 2 alone differs, at (1,0) ranks 1 and 2 both differ (rank 1 one way, rank 2
// another); rank 3 lacks (1,1), which the others agree on.
TEST(Consistency, TheFirstDifferenceNamesTheRanksUnlikeTheMostCommonHash) {
  const Records r0 = records({{0, 0, "a"}, {0, 1, "b"}, {1, 0, "c"}, {1, 1, "d"}});
  const Records r1 = records({{0, 0, "a"}, {0, 1, "b"}, {1, 0, "x"}, {1, 1, "d"}});
  const Records r2 = records({{0, 0, "a"}, {0, 1, "B"}, {1, 0, "y"}, {1, 1, "d"}});
  const Records r3 = records({{0, 0, "a"}, {0, 1, "b"}, {1, 0, "c"}});
  const Comparison c = compare({{0, &r0}, {1, &r1}, {2, &r2}, {3, &r3}});
  EXPECT_EQ(c.compared, 4u);
  EXPECT_EQ(c.differing, 2u);
  ASSERT_TRUE(c.first);
  EXPECT_EQ(c.first->record.step, 0);
  EXPECT_EQ(c.first->record.index, 1);
  EXPECT_THAT(c.first->ranks, ElementsAre(2));
  EXPECT_THAT(c.first->others, ElementsAre(0, 1, 3));
  EXPECT_EQ(
      describe(*c.first),
      "the parameters written by adamw_step #10 (record 1 of the step) on rank(s) 2, unlike rank(s) 0,1,3");
  const Comparison same = compare({{0, &r0}, {3, &r3}});
  EXPECT_EQ(same.differing, 0u);
  EXPECT_FALSE(same.first);
}

TEST(Consistency, RankListsAreCappedAt32) {
  std::vector<int> many;
  for (int i = 0; i < 40; ++i) many.push_back(i);
  const std::string s = rankList(many);
  EXPECT_TRUE(s.starts_with("0,1,2,")) << s;
  EXPECT_TRUE(s.ends_with(",31,… (40 ranks)")) << s;
  EXPECT_EQ(rankList({}), "");
}

// Lines come whole however the file is cut; an over-long line is dropped, the next one is not.
TEST(Consistency, LinesAreSplitWholeAndOverlongOnesDropped) {
  const std::string text = "one\ntwo\n" + std::string(kMaxLineBytes + 10, 'x') + "\nthree\nfour";
  for (const std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{4096}, text.size()}) {
    LineSplitter split;
    std::vector<std::string> got;
    for (std::size_t at = 0; at < text.size(); at += piece)
      split.feed(std::string_view(text).substr(at, piece), [&](std::string_view l) { got.emplace_back(l); });
    EXPECT_THAT(got, ElementsAre("one", "two", "three")) << piece;  // "four" has no newline yet
    split.feed("\n", [&](std::string_view l) { got.emplace_back(l); });
    EXPECT_EQ(got.back(), "four");
  }
}

}  // namespace
}  // namespace opscope::consistency
