// The hook layer: every exported op has a wrapper; the configuration is parsed and validated; a bad value
// stops the program before main with status 2; OP_DUMP_ARGS and OP_SYNC_EXEC work; the real mnist_train
// computes bit-identical losses under LD_PRELOAD; a crash still flushes the tools.
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <opscope/config.h>

#include <mlu/op_args.h>

#include <fcntl.h>
#include <gelf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include "test_paths.h"

namespace fs = std::filesystem;
using opscope_test::Env;
using opscope_test::linesStartingWith;
using opscope_test::run;
using opscope_test::tempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct DynamicSymbols {
  std::set<std::string> defined;
  std::vector<std::string> needed;
};

// The defined dynamic symbols and DT_NEEDED entries of a shared library, read with libelf.
DynamicSymbols readDynamic(const std::string& path) {
  DynamicSymbols result;
  elf_version(EV_CURRENT);
  const int fd = open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return result;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    gelf_getshdr(scn, &shdr);
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (shdr.sh_type == SHT_DYNSYM) {
      const auto count = shdr.sh_size / shdr.sh_entsize;
      for (std::size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        gelf_getsym(data, static_cast<int>(i), &sym);
        if (sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
        result.defined.insert(elf_strptr(elf, shdr.sh_link, sym.st_name));
      }
    } else if (shdr.sh_type == SHT_DYNAMIC) {
      const auto count = shdr.sh_size / shdr.sh_entsize;
      for (std::size_t i = 0; i < count; ++i) {
        GElf_Dyn dyn;
        gelf_getdyn(data, static_cast<int>(i), &dyn);
        if (dyn.d_tag == DT_NEEDED) result.needed.emplace_back(elf_strptr(elf, shdr.sh_link, dyn.d_un.d_val));
      }
    }
  }
  elf_end(elf);
  close(fd);
  return result;
}

std::vector<std::string> lossLines(const std::string& output) {
  return linesStartingWith(output, "Train Epoch");
}

Env preload(Env env = {}) {
  env.emplace_back("LD_PRELOAD", LIBOPSCOPE_PATH);
  return env;
}

const char* getenvFrom(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}

opscope::Config parse(const std::map<std::string, std::string>& env) {
  std::vector<std::string> entries;
  for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
  return opscope::parseConfig([&](const char* name) { return getenvFrom(env, name); }, entries);
}

std::string configError(const std::map<std::string, std::string>& env) {
  try {
    parse(env);
  } catch (const opscope::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(HookSymbols, EveryExportedOpAndRuntimeCallHasAWrapper) {
  const DynamicSymbols ops = readDynamic(LIBMLUOPS_PATH);
  const DynamicSymbols hook = readDynamic(LIBOPSCOPE_PATH);
  // Every op of the schema is exported by the library...
  std::size_t schema_ops = 0;
  mlu::forEachOp([&]<typename Args>() {
    ++schema_ops;
    EXPECT_TRUE(ops.defined.count(std::string(Args::kSymbol))) << Args::kSymbol << " is not exported";
  });
  EXPECT_EQ(schema_ops, mlu::kOpCount);
  // ... and every exported op symbol of the library is wrapped. (The library's other exports — handle,
  // descriptors, workspace sizes, dtype conversion, errors — are not ops.)
  std::set<std::string> op_symbols;
  mlu::forEachOp([&]<typename Args>() { op_symbols.insert(std::string(Args::kSymbol)); });
  std::size_t wrapped = 0;
  for (const auto& symbol : ops.defined) {
    if (!op_symbols.count(symbol)) continue;
    EXPECT_TRUE(hook.defined.count(symbol)) << symbol << " has no wrapper in libopscope.so";
    wrapped += hook.defined.count(symbol);
  }
  EXPECT_EQ(wrapped, mlu::kOpCount);
  for (const char* call : {"mlurtMalloc",
                           "mlurtFree",
                           "mlurtHostMalloc",
                           "mlurtHostFree",
                           "mlurtMemcpy",
                           "mlurtMemcpyAsync",
                           "mlurtMemset",
                           "mlurtMemsetAsync",
                           "mlurtQueueCreate",
                           "mlurtQueueDestroy",
                           "mlurtQueueSync",
                           "mlurtQueueQuery",
                           "mlurtQueueWaitNotifier",
                           "mlurtLaunchHostFunc",
                           "mlurtNotifierCreate",
                           "mlurtNotifierDestroy",
                           "mlurtPlaceNotifier",
                           "mlurtNotifierQuery",
                           "mlurtNotifierSync",
                           "mlurtNotifierElapsedTime",
                           "mlurtDeviceSynchronize"}) {
    EXPECT_TRUE(hook.defined.count(call)) << call;
  }
  // Every entry point of the collective library is wrapped (its transfers reach the tools).
  const DynamicSymbols collectives = readDynamic(opscope_test::paths::kLibmlucl);
  std::size_t collective_symbols = 0;
  for (const auto& symbol : collectives.defined) {
    if (symbol.rfind("mlucl", 0) != 0) continue;
    ++collective_symbols;
    EXPECT_TRUE(hook.defined.count(symbol)) << symbol << " has no wrapper in libopscope.so";
  }
  EXPECT_EQ(collective_symbols, 19u) << "libmlucl's entry points (mlu/mlucl.h)";
  // Nothing else leaks out, and the hook links no MLU library (it can be preloaded into any program).
  for (const auto& symbol : hook.defined) {
    EXPECT_TRUE(symbol.rfind("mluop", 0) == 0 || symbol.rfind("mlurt", 0) == 0 ||
                symbol.rfind("mlucl", 0) == 0 || symbol.rfind("opscope_", 0) == 0)
        << symbol;
  }
  for (const auto& lib : hook.needed) EXPECT_THAT(lib, Not(HasSubstr("libml"))) << lib;
}

TEST(HookConfig, Defaults) {
  const auto c = parse({});
  EXPECT_FALSE(c.capture);
  EXPECT_EQ(c.capture_max_mb, 4096u);
  EXPECT_EQ(c.capture_ops.count(), mlu::kOpCount);
  EXPECT_TRUE(c.auto_fallback);
  EXPECT_FALSE(c.fallback);
  EXPECT_EQ(c.dump_args, 0);
  EXPECT_EQ(c.result_root, "opscope_results");
  EXPECT_FALSE(c.watchesOps());
  EXPECT_TRUE(c.set_options.empty());
}

// The option table (options.h): a variable two edits from one of its names is a warning naming it; names
// far from all of them (the program's own variables, the runtime's) are not.
TEST(HookConfig, AMisspelledVariableIsAWarningNamingTheOneMeant) {
  const auto typo = parse({{"OP_CAPTUER", "1"}, {"mem_check", "1"}, {"OP_TRACE_MAXMB", "5"}});
  ASSERT_EQ(typo.warnings.size(), 3u);
  EXPECT_THAT(typo.warnings[0], HasSubstr("OP_CAPTUER is not an opscope variable; did you mean OP_CAPTURE?"));
  EXPECT_THAT(typo.warnings[1], HasSubstr("OP_TRACE_MAXMB is not an opscope variable; did you mean "
                                          "OP_TRACE_MAX_MB?"));
  EXPECT_THAT(typo.warnings[2], HasSubstr("mem_check is not an opscope variable; did you mean MEM_CHECK?"));
  EXPECT_FALSE(typo.capture);
  const auto others = parse({{"HOME", "/root"},
                             {"MLU_SIM_FAULT", "relu:nan"},
                             {"OMPI_COMM_WORLD_RANK", "1"},
                             {"LD_PRELOAD", "/x.so"},
                             {"RANK", "0"},
                             {"ADD_AUTOCOMPARE_ERROR_TOLERANCE_FLOAT32", "1e-3,1e-3"},
                             {"OP_CAPTURE", "1"}});
  EXPECT_TRUE(others.warnings.empty()) << others.warnings[0];
  // Every row the parser reads has its default in the table.
  EXPECT_EQ(parse({}).capture_max_mb, opscope::optionDefault("OP_CAPTURE_MAX_MB"));
  EXPECT_EQ(opscope::closeOptionName("OP_CAPTURE"), "");
}

// A misspelled variable that turns nothing on: nothing would start a run to print it with, so it is said
// before main.
TEST(HookProcess, AMisspelledVariableAloneIsSaidBeforeMain) {
  const auto r = run({HOOK_PROBE_PATH}, preload({{"OP_CAPTUER", "1"}}));
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, HasSubstr("opscope: warning: OP_CAPTUER is not an opscope variable; did you mean "
                               "OP_CAPTURE?"));
}

// README.md's and docs/DESIGN.md's tables of the hook's environment name exactly the variables of the table.
TEST(HookConfig, TheDocsListEveryVariableOfTheOptionTable) {
  auto section = [](const std::string& file, const std::string& heading) {
    std::ifstream in(std::string(opscope_test::paths::kSourceDir) + "/" + file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string all = text.str();
    const std::size_t begin = all.find(heading);
    EXPECT_NE(begin, std::string::npos) << file << ": no '" << heading << "'";
    const std::size_t end = all.find("\n#", begin + heading.size());
    return begin == std::string::npos ? std::string() : all.substr(begin, end - begin);
  };
  // `NAME` or `NAME=value` in the table's rows, NAME in capitals (with <DTYPE>, <OP>).
  auto names = [](const std::string& text) {
    std::set<std::string> out;
    std::size_t line_start = 0;
    while (line_start < text.size()) {
      const std::size_t line_end = std::min(text.find('\n', line_start), text.size());
      const std::string line = text.substr(line_start, line_end - line_start);
      line_start = line_end + 1;
      if (!line.starts_with("| `")) continue;
      const std::string first_cell = line.substr(0, line.find(" | "));
      for (std::size_t a = first_cell.find('`'); a != std::string::npos; a = first_cell.find('`', a + 1)) {
        const std::size_t b = first_cell.find('`', a + 1);
        if (b == std::string::npos) break;
        std::string token = first_cell.substr(a + 1, b - a - 1);
        token = token.substr(0, token.find('='));
        const bool variable =
            !token.empty() && token.size() > 3 && std::all_of(token.begin(), token.end(), [](char c) {
              return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '<' || c == '>';
            });
        if (variable) out.insert(token);
        a = b;
      }
    }
    return out;
  };
  std::set<std::string> table;
  for (const auto& o : opscope::kOptions) table.insert(std::string(o.name));
  std::set<std::string> readme = names(section("README.md", "### The hook layer's environment"));
  readme.insert("OPSCOPE_HOOK_LIB");  // the launcher's, listed with the launcher
  EXPECT_EQ(readme, table);
  EXPECT_EQ(names(section("docs/DESIGN.md", "### Environment")), table);
}

TEST(HookConfig, ListsMatchNamesAndWholeNameRegexesAndTheDisableListWins) {
  const auto c = parse({{"OP_CAPTURE", "1"},
                        {"OP_CAPTURE_LIST", " conv2d.* , add,relu"},
                        {"OP_CAPTURE_DISABLE_LIST", "conv2d_backward_.*"}});
  EXPECT_TRUE(c.capture);
  EXPECT_TRUE(c.capture_ops.matches(mlu::OpId::conv2d_forward));
  EXPECT_FALSE(c.capture_ops.matches(mlu::OpId::conv2d_backward_data));
  EXPECT_TRUE(c.capture_ops.matches(mlu::OpId::add));
  EXPECT_FALSE(c.capture_ops.matches(mlu::OpId::add_scalar));  // "add" matches the whole name only
  EXPECT_TRUE(c.capture_ops.matches(mlu::OpId::relu));
  EXPECT_FALSE(c.capture_ops.matches(mlu::OpId::relu_backward));
  EXPECT_EQ(c.capture_ops.count(), 3u);
  // A disable list alone: every op except those.
  const auto d = parse({{"OP_TIME_MEASURE_DISABLE_LIST", "fill,copy"}});
  EXPECT_EQ(d.time_measure_ops.count(), mlu::kOpCount - 2);
  EXPECT_FALSE(d.time_measure_ops.matches(mlu::OpId::fill));
  // Either fallback list turns fallback on.
  EXPECT_TRUE(parse({{"OP_FALLBACK_DISABLE_LIST", "matmul"}}).fallback);
}

// PyTorch-level items: aten::REGEX matches a call inside a matching framework op at any depth of its stack,
// module:REGEX the call's module path; they mix with kernel-op items, the disable list wins, bad patterns are
// refused, and a list (or item) that no call matched is said after the run.
TEST(HookConfig, AtenAndModuleItemsMatchTheFrameworkStackAndTheModule) {
  opscope::FrameworkSite layer1{1, "layer1.0.conv1", "train.py:9 in step", ""};
  opscope::FrameworkSite layer2{2, "layer2.0.conv1", "train.py:9 in step", ""};
  auto call = [](mlu::OpId op, std::string_view stack, const opscope::FrameworkSite* site) {
    opscope::OpCall c;
    c.op = op;
    c.framework_op = stack;
    c.site = site;
    return c;
  };
  const auto c = parse({{"OP_CAPTURE", "1"}, {"OP_CAPTURE_LIST", "aten::addmm, relu"}});
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_FALSE(c.capture_ops.matches(mlu::OpId::linear));  // by kernel name alone: only relu
  EXPECT_TRUE(c.capture_ops.hasFrameworkItems());
  EXPECT_TRUE(c.capture_ops.matches(call(mlu::OpId::linear, "aten::linear > aten::addmm", nullptr)));
  EXPECT_TRUE(c.capture_ops.matches(call(mlu::OpId::linear, "aten::addmm", &layer1)));
  EXPECT_FALSE(c.capture_ops.matches(call(mlu::OpId::linear, "aten::addmm_", nullptr)));  // whole names
  EXPECT_FALSE(c.capture_ops.matches(call(mlu::OpId::matmul, "AddmmBackward0 > aten::mm", nullptr)));
  EXPECT_TRUE(c.capture_ops.matches(call(mlu::OpId::relu, "aten::relu", nullptr)));
  EXPECT_FALSE(c.capture_ops.matches(call(mlu::OpId::add, "", nullptr)));
  EXPECT_TRUE(c.capture_ops.unmatched().empty());

  const auto m = parse({{"OP_AUTOCOMPARE", "1"},
                        {"OP_AUTOCOMPARE_LIST", R"(module:layer1\..*,module:nosuch)"},
                        {"OP_AUTOCOMPARE_DISABLE_LIST", "aten::.*norm.*"}});
  EXPECT_TRUE(m.autocompare_ops.matches(call(mlu::OpId::conv2d_forward, "aten::conv2d", &layer1)));
  EXPECT_FALSE(m.autocompare_ops.matches(call(mlu::OpId::conv2d_forward, "aten::conv2d", &layer2)));
  EXPECT_FALSE(m.autocompare_ops.matches(call(mlu::OpId::conv2d_forward, "aten::conv2d", nullptr)));
  EXPECT_FALSE(m.autocompare_ops.matches(
      call(mlu::OpId::batch_norm_forward, "aten::batch_norm > aten::native_batch_norm", &layer1)));
  // Asked again (the decision is cached per stack and module): the same answers.
  EXPECT_TRUE(m.autocompare_ops.matches(call(mlu::OpId::conv2d_forward, "aten::conv2d", &layer1)));
  EXPECT_FALSE(m.autocompare_ops.matches(call(mlu::OpId::conv2d_forward, "aten::conv2d", &layer2)));
  const opscope::OpFilter copy = m.autocompare_ops;  // a tool's copy shares what matched
  EXPECT_THAT(copy.unmatched(),
              ElementsAre("OP_AUTOCOMPARE_LIST: 'module:nosuch' matched no call of this run"));

  const auto never = parse({{"OP_FALLBACK_LIST", "aten::native_layer_norm.*"}});
  EXPECT_TRUE(never.fallback);
  EXPECT_TRUE(never.fallback_ops.unmatched().empty());  // offered no call: nothing to say
  EXPECT_FALSE(never.fallback_ops.matches(call(mlu::OpId::add, "aten::add", nullptr)));
  EXPECT_THAT(never.fallback_ops.unmatched(),
              ElementsAre("OP_FALLBACK_LIST='aten::native_layer_norm.*' matched no call of this run"));

  EXPECT_THAT(configError({{"OP_CAPTURE_LIST", "module:layer1.(("}}),
              HasSubstr("OP_CAPTURE_LIST: invalid regular expression 'module:layer1.((' (item 1)"));
  EXPECT_THAT(configError({{"OP_TIME_MEASURE_DISABLE_LIST", "relu,aten::[z-a]"}}),
              HasSubstr("OP_TIME_MEASURE_DISABLE_LIST: invalid regular expression 'aten::[z-a]' (item 2)"));
}

TEST(HookConfig, ValuesAndTolerances) {
  const auto c = parse({{"OP_DUMP_ARGS", "3"},
                        {"OP_SYNC_EXEC", "true"},
                        {"OP_CAPTURE_MAX_MB", "12"},
                        {"AUTOCOMPARE_ERROR_TOLERANCE", "1e-4, 2e-4"},
                        {"AUTOCOMPARE_ERROR_TOLERANCE_BFLOAT16", "0.05,0.05"},
                        {"CONV2D_FORWARD_AUTOCOMPARE_ERROR_TOLERANCE_FLOAT16", "3e-3,4e-3"},
                        {"OPSCOPE_RESULT_DIR", "/tmp/x"}});
  EXPECT_EQ(c.dump_args, 3);
  EXPECT_TRUE(c.sync_exec);
  EXPECT_EQ(c.capture_max_mb, 12u);
  ASSERT_TRUE(c.tolerance.has_value());
  EXPECT_DOUBLE_EQ(c.tolerance->atol, 1e-4);
  EXPECT_DOUBLE_EQ(c.tolerance->rtol, 2e-4);
  ASSERT_EQ(c.dtype_tolerance.count(MLUOP_DTYPE_BFLOAT16), 1u);
  EXPECT_DOUBLE_EQ(c.dtype_tolerance.at(MLUOP_DTYPE_BFLOAT16).atol, 0.05);
  const auto key = std::make_pair(mlu::OpId::conv2d_forward, MLUOP_DTYPE_HALF);
  ASSERT_EQ(c.op_tolerance.count(key), 1u);
  EXPECT_DOUBLE_EQ(c.op_tolerance.at(key).rtol, 4e-3);
  EXPECT_EQ(c.result_root, "/tmp/x");
  EXPECT_EQ(c.set_options.size(), 7u);
}

// An empty value means unset for every variable, the per-dtype and per-op tolerances too (they were refused).
TEST(HookConfig, EmptyValuesMeanUnset) {
  const auto c = parse({{"AUTOCOMPARE_ERROR_TOLERANCE_FLOAT16", ""},
                        {"CONV2D_FORWARD_AUTOCOMPARE_ERROR_TOLERANCE_FLOAT32", ""},
                        {"AUTOCOMPARE_ERROR_TOLERANCE", ""},
                        {"OP_CAPTURE_LIST", ""},
                        {"OP_DUMP_ARGS", ""}});
  EXPECT_TRUE(c.dtype_tolerance.empty());
  EXPECT_TRUE(c.op_tolerance.empty());
  EXPECT_FALSE(c.tolerance.has_value());
  EXPECT_EQ(c.capture_ops.count(), mlu::kOpCount);
  EXPECT_EQ(c.dump_args, 0);
}

TEST(HookConfig, MalformedValuesNameTheVariableAndTheItem) {
  EXPECT_THAT(configError({{"OP_CAPTURE_LIST", "add,conv2d(,relu"}}),
              HasSubstr("OP_CAPTURE_LIST: invalid regular expression 'conv2d(' (item 2)"));
  EXPECT_THAT(configError({{"OP_DUMP_ARGS", "4"}}), HasSubstr("OP_DUMP_ARGS: 4 is out of range (0 to 3)"));
  EXPECT_THAT(configError({{"OP_DUMP_ARGS", "two"}}), HasSubstr("OP_DUMP_ARGS: 'two' is not a whole number"));
  EXPECT_THAT(configError({{"OP_CAPTURE", "yes please"}}),
              HasSubstr("OP_CAPTURE: 'yes please' is not a boolean"));
  EXPECT_THAT(configError({{"OP_CAPTURE_MAX_MB", "-5"}}), HasSubstr("OP_CAPTURE_MAX_MB"));
  EXPECT_THAT(configError({{"OP_CAPTURE_MAX_MB", "0"}}), HasSubstr("OP_CAPTURE_MAX_MB: 0 is out of range"));
  EXPECT_THAT(configError({{"OP_CAPTURE_MODE", "statistics"}}),
              HasSubstr("OP_CAPTURE_MODE: 'statistics' is not a capture mode (use tensors or stats)"));
  EXPECT_TRUE(parse({{"OP_CAPTURE_MODE", "stats"}}).capture_stats);
  EXPECT_FALSE(parse({{"OP_CAPTURE_MODE", "tensors"}}).capture_stats);
  EXPECT_THAT(configError({{"OP_CAPTURE_RING", "5000"}}), HasSubstr("OP_CAPTURE_RING: 5000 is out of range"));
  EXPECT_THAT(configError({{"AUTOCOMPARE_ERROR_TOLERANCE", "1e-5"}}), HasSubstr("is not atol,rtol"));
  EXPECT_THAT(configError({{"AUTOCOMPARE_ERROR_TOLERANCE", "1e-400,1e-5"}}),
              HasSubstr("'1e-400' is too small to represent"));
  EXPECT_DOUBLE_EQ(parse({{"AUTOCOMPARE_ERROR_TOLERANCE", "1e-310,1e-5"}}).tolerance->atol,
                   1e-310);  // subnormal
  EXPECT_THAT(configError({{"AUTOCOMPARE_ERROR_TOLERANCE", "1e-5,abc"}}),
              HasSubstr("'abc' is not a non-negative"));
  EXPECT_THAT(configError({{"AUTOCOMPARE_ERROR_TOLERANCE_FLOAT8", "1,1"}}),
              HasSubstr("unknown dtype 'FLOAT8'"));
  EXPECT_THAT(configError({{"NOSUCHOP_AUTOCOMPARE_ERROR_TOLERANCE_FLOAT32", "1,1"}}),
              HasSubstr("no op is named 'NOSUCHOP'"));
  EXPECT_THAT(configError({{"OP_FALLBACK_DISABLE_LIST", "[z-a]"}}), HasSubstr("OP_FALLBACK_DISABLE_LIST"));
}

// OP_AUTOCOMPARE_SAMPLE and OP_CAPTURE_SAMPLE: first:N, every:K, steps:A-B, joined by commas; each malformed
// value is refused naming the variable and the item.
TEST(HookConfig, SamplingValues) {
  const auto c =
      parse({{"OP_AUTOCOMPARE_SAMPLE", " first:4 "}, {"OP_CAPTURE_SAMPLE", "steps:10-19, every:2"}});
  EXPECT_EQ(c.autocompare_sample.first, 4u);
  EXPECT_FALSE(c.autocompare_sample.every || c.autocompare_sample.steps);
  EXPECT_EQ(c.autocompare_sample.describe(), "the first 4 calls of each op signature");
  EXPECT_EQ(c.autocompare_sample.text, "first:4");
  ASSERT_TRUE(c.capture_sample.steps.has_value());
  EXPECT_EQ(c.capture_sample.steps->first, 10u);
  EXPECT_EQ(c.capture_sample.steps->second, 19u);
  EXPECT_EQ(c.capture_sample.every, 2u);
  EXPECT_EQ(c.capture_sample.describe(), "steps 10-19, every 2nd step (steps 0, 2, 4, ...)");
  EXPECT_EQ(parse({{"OP_CAPTURE_SAMPLE", "steps:3"}}).capture_sample.describe(), "step 3");
  EXPECT_FALSE(parse({}).autocompare_sample.samples());
  for (const auto& [value, why] : std::vector<std::pair<std::string, std::string>>{
           {"first:0", "'first:0' needs a whole number of at least 1"},
           {"first:", "'first:' needs a whole number of at least 1"},
           {"first:4x", "needs a whole number"},
           {"every:-2", "needs a whole number"},
           {"steps:9-3", "'steps:9-3' ends before it starts"},
           {"steps:a-b", "needs steps A-B"},
           {"last:3", "'last:3' is not a sampling"},
           {"first:2,first:3", "'first:3' repeats a kind"},
           {",", "says no sampling"},
       }) {
    const std::string error = configError({{"OP_AUTOCOMPARE_SAMPLE", value}});
    EXPECT_THAT(error, HasSubstr("OP_AUTOCOMPARE_SAMPLE: ")) << value;
    EXPECT_THAT(error, HasSubstr(why)) << value;
  }
}

// Lists are matched by RE2 against the op names once: a pattern that backtracks exponentially in
// std::regex costs nothing, an overlong item is refused, a C symbol names its op, and an item that matches
// no op is a warning naming the closest op names.
TEST(HookConfig, ListsMatchInLinearTimeAndSayWhatMatchesNothing) {
  // The ops it matches: the names that end in 'x' (every op name is made of word characters).
  const auto slow = parse({{"OP_CAPTURE_LIST", R"((\w+_?)+x)"}});
  std::size_t ending_in_x = 0;
  for (std::size_t i = 0; i < mlu::kOpCount; ++i) {
    const std::string_view name = mlu::opName(static_cast<mlu::OpId>(i));
    const bool match = name.ends_with('x');
    ending_in_x += match ? 1 : 0;
    EXPECT_EQ(slow.capture_ops.matches(static_cast<mlu::OpId>(i)), match) << name;
  }
  EXPECT_GT(ending_in_x, 0u);
  EXPECT_TRUE(slow.warnings.empty());
  const auto none = parse({{"OP_CAPTURE_LIST", R"((\w+_?)+!)"}});
  EXPECT_EQ(none.capture_ops.count(), 0u);
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_THAT(none.warnings[0], HasSubstr("OP_CAPTURE_LIST: '(\\w+_?)+!' (item 1) matches no op"));
  EXPECT_THAT(configError({{"OP_FALLBACK_LIST", "relu," + std::string(100000, 'a')}}),
              HasSubstr("OP_FALLBACK_LIST: item 2 is 100000 characters long (at most 1000)"));
  const auto symbol = parse({{"OP_CAPTURE_LIST", "mluopConvolutionForward"}});
  EXPECT_TRUE(symbol.capture_ops.matches(mlu::OpId::conv2d_forward));
  EXPECT_EQ(symbol.capture_ops.count(), 1u);
  EXPECT_TRUE(symbol.warnings.empty());
  const auto typo =
      parse({{"OP_FALLBACK_LIST", "Relu"}, {"OP_AUTOCOMPARE_DISABLE_LIST", "conv2d_.*,softmax_forwardd"}});
  EXPECT_EQ(typo.fallback_ops.count(), 0u);
  ASSERT_EQ(typo.warnings.size(), 2u);
  EXPECT_THAT(typo.warnings[0],
              HasSubstr("OP_AUTOCOMPARE_DISABLE_LIST: 'softmax_forwardd' (item 2) matches no op "
                        "(closest: softmax_forward"));
  EXPECT_THAT(typo.warnings[1], HasSubstr("OP_FALLBACK_LIST: 'Relu' (item 1) matches no op (closest: relu"));
  EXPECT_THAT(configError({{"OP_CAPTURE_LIST", "(?=x)relu"}}),
              HasSubstr("OP_CAPTURE_LIST: invalid regular expression '(?=x)relu' (item 1)"));
}

TEST(HookProcess, BadConfigurationStopsTheProgramBeforeMainWithStatusTwo) {
  const fs::path dir = tempDir("bad");
  const fs::path file = dir / "a_file";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const std::vector<std::pair<Env, std::string>> cases = {
      {{{"OP_CAPTURE_LIST", "conv2d("}}, "OP_CAPTURE_LIST: invalid regular expression 'conv2d('"},
      {{{"OP_DUMP_ARGS", "5"}}, "OP_DUMP_ARGS: 5 is out of range"},
      {{{"OP_CAPTURE_MAX_MB", "lots"}}, "OP_CAPTURE_MAX_MB: 'lots' is not a whole number"},
      // A result directory under a regular file cannot be created.
      {{{"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", (file / "results").string()}},
       "OPSCOPE_RESULT_DIR: cannot create"},
  };
  for (const auto& [env, message] : cases) {
    const auto r = run({HOOK_PROBE_PATH}, preload(env));
    EXPECT_EQ(r.exit_code, 2) << message << "\n" << r.all();
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(linesStartingWith(r.err, "opscope: ").back().find(message) != std::string::npos, true) << r.err;
    EXPECT_THAT(r.out, Not(HasSubstr("main ran")));
  }
  // A list that would hang std::regex's backtracking at start-up: the program runs, with a warning.
  // (Options and warnings are printed at the program's first MLU call: "ops" makes some.)
  const auto hang = run({HOOK_PROBE_PATH, "ops"}, preload({{"OP_CAPTURE", "1"},
                                                           {"OP_CAPTURE_LIST", R"((\w+_?)+!)"},
                                                           {"OPSCOPE_RESULT_DIR", (dir / "runs").string()}}));
  EXPECT_EQ(hang.exit_code, 0) << hang.all();
  EXPECT_THAT(hang.err, HasSubstr("opscope: warning: OP_CAPTURE_LIST: '(\\w+_?)+!' (item 1) matches no op"));
  // The same program runs when the configuration is good, and each set option is printed once.
  const auto ok = run({HOOK_PROBE_PATH, "ops"}, preload({{"OP_DUMP_ARGS", "1"}}));
  EXPECT_EQ(ok.exit_code, 0) << ok.all();
  EXPECT_THAT(ok.out, HasSubstr("main ran"));
  EXPECT_EQ(linesStartingWith(ok.err, "opscope: option OP_DUMP_ARGS=1").size(), 1u);
  fs::remove_all(dir);
}

// Every tool on, in processes that never use the MLU: nothing is written (not even the result root) and
// nothing printed. A wrapper such as `timeout` with LD_PRELOAD set before it leaves nothing either, and the
// program it runs gets the one result directory.
TEST(HookProcess, AProcessThatNeverUsesTheDeviceLeavesNothingAndPrintsNothing) {
  const fs::path dir = tempDir("unused");
  const fs::path root = dir / "results";
  const Env every_tool = preload({{"OP_CAPTURE", "1"},
                                  {"OP_AUTOCOMPARE", "1"},
                                  {"OP_TIME_MEASURE", "1"},
                                  {"MEM_CHECK", "1"},
                                  {"OP_OVERFLOW_CHECK", "1"},
                                  {"OP_FALLBACK_LIST", "Relu"},
                                  {"OP_DUMP_ARGS", "1"},
                                  {"OPSCOPE_RESULT_DIR", root.string()}});
  std::vector<std::vector<std::string>> idle = {{HOOK_PROBE_PATH}};
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (A sanitizer build of the hook cannot be preloaded into programs built without it.)
  idle.push_back({"/bin/true"});
  idle.push_back({"/bin/sh", "-c", "exit 3"});
#endif
  for (const auto& argv : idle) {
    const auto r = run(argv, every_tool);
    EXPECT_EQ(r.exit_code, argv[0] == "/bin/sh" ? 3 : 0) << argv[0] << "\n" << r.all();
    EXPECT_EQ(r.err, "") << argv[0];
    EXPECT_FALSE(fs::exists(root)) << argv[0];
  }
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  const auto wrapped = run({"/usr/bin/timeout", "60", HOOK_PROBE_PATH, "ops"}, every_tool);
  EXPECT_EQ(wrapped.exit_code, 0) << wrapped.all();
  int dirs = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    ++dirs;
    EXPECT_TRUE(fs::exists(entry.path() / "capture.db")) << entry.path();
  }
  EXPECT_EQ(dirs, 1);
  EXPECT_EQ(linesStartingWith(wrapped.err, "opscope: option OP_CAPTURE=1").size(), 1u) << wrapped.err;
  EXPECT_EQ(linesStartingWith(wrapped.err, "opscope: captured ").size(), 1u) << wrapped.err;
  EXPECT_EQ(linesStartingWith(wrapped.err, "opscope: warning: OP_FALLBACK_LIST: 'Relu'").size(), 1u);
#endif
  // The root is checked before main all the same: a bad one stops even a program that would not use it.
  std::ofstream(dir / "a_file") << "x";
  const auto bad =
      run({HOOK_PROBE_PATH},
          preload({{"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", (dir / "a_file" / "r").string()}}));
  EXPECT_EQ(bad.exit_code, 2) << bad.all();
  EXPECT_THAT(bad.err, HasSubstr("is not a directory"));
  fs::remove_all(dir);
}

// Two runs in different PID namespaces (both pid 1) started in the same second under one root: result
// directories with the same time and pid, told apart by their random part; each run's capture is whole.
TEST(HookProcess, RunsWithTheSamePidInTheSameSecondDoNotCollide) {
  if (run({"/usr/bin/unshare", "--pid", "--fork", "/bin/true"}).exit_code != 0)
    GTEST_SKIP() << "this machine does not allow new PID namespaces (unshare --pid)";
  const fs::path root = tempDir("pidns");
  const std::string one = fmt::format(
      "/usr/bin/unshare --pid --fork /usr/bin/env LD_PRELOAD={} OP_CAPTURE=1 OPSCOPE_RESULT_DIR={} {} ops",
      LIBOPSCOPE_PATH, root.string(), HOOK_PROBE_PATH);
  const auto r = run({"/bin/sh", "-c", fmt::format("{0} >/dev/null & {0} >/dev/null & wait", one)},
                     {opscope_test::kSanitizerCrashOptions});
  EXPECT_EQ(linesStartingWith(r.err, "opscope: captured 3 ops").size(), 2u) << r.all();
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    EXPECT_THAT(name, ::testing::MatchesRegex("[0-9]{8}-[0-9]{6}-1-[A-Za-z0-9]{6}")) << name;
    names.insert(name);
    const auto count =
        run({"/usr/bin/sqlite3", (entry.path() / "capture.db").string(), "SELECT count(*) FROM ops"});
    EXPECT_EQ(count.out, "3\n") << name << count.err;
  }
  EXPECT_EQ(names.size(), 2u);
  fs::remove_all(root);
}

// A command line that is not UTF-8 (a Latin-1 file name, say) is written into run.json with U+FFFD in its
// place, not refused (nlohmann's dump throws on it by default).
TEST(HookProcess, ACommandLineThatIsNotUtf8IsWrittenReplaced) {
  const fs::path dir = tempDir("latin1");
  const auto r = run({HOOK_PROBE_PATH, "ops", "caf\xe9"},
                     preload({{"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", dir.string()}}));
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, Not(HasSubstr("run.json")));
  int found = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path() / "run.json");
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_THAT(text.str(), HasSubstr("ops caf\xef\xbf\xbd\"")) << text.str();
    EXPECT_THAT(text.str(), HasSubstr("\"ended\": \"exit\""));
    ++found;
  }
  EXPECT_EQ(found, 1);
  fs::remove_all(dir);
}

TEST(HookProcess, DumpArgsLevelTwoDescribesEveryArgumentAndErrorsAreUnchanged) {
  const auto plain = run({HOOK_PROBE_PATH, "ops"});
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  const auto r = run({HOOK_PROBE_PATH, "ops"}, preload({{"OP_DUMP_ARGS", "2"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  // The program sees exactly what it sees without the hook: statuses, error messages, runtime last error
  // and results.
  EXPECT_EQ(r.out, plain.out);
  EXPECT_THAT(plain.out, HasSubstr("bad add: status 3 message 'add:"));
  EXPECT_THAT(plain.out, HasSubstr("result 4.5 4.5"));  // 1.5 + 2 * 1.5
  EXPECT_THAT(r.err, HasSubstr("opscope: op #1 fill (mluopFill) thread 0 device 0"));
  EXPECT_THAT(r.err, HasSubstr("opscope:   scalar    value = 1.5"));
  EXPECT_THAT(r.err, HasSubstr("opscope: op #2 add (mluopAdd)"));
  EXPECT_THAT(r.err, HasSubstr("opscope:   scalar    alpha = 2"));
  EXPECT_THAT(r.err,
              HasSubstr("opscope:   in        a: float32[2,4] strides [8,2] ARRAY non-contiguous @0x"));
  EXPECT_THAT(r.err, HasSubstr("opscope:   out       c: float32[2,4] strides [4,1] ARRAY contiguous @0x"));
  EXPECT_THAT(r.err, HasSubstr("opscope: op #3 add (mluopAdd)"));
  // The header is the call's one-line form (op_format.h): its tensors, strides only where not row-major.
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex(
                  "opscope: op #2 add \\(mluopAdd\\) thread 0 device 0 queue [0-9]+: a float32\\[2,4\\] "
                  "strides \\[8,2\\]; b float32\\[2,4\\] strides \\[8,2\\]; c float32\\[2,4\\]\n"));
}

TEST(HookProcess, DumpArgsLevelThreePrintsValuesLikePyTorch) {
  const auto r = run({HOOK_PROBE_PATH, "ops"}, preload({{"OP_DUMP_ARGS", "3"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, HasSubstr("before: a = tensor([[1.5000, 1.5000, 1.5000, 1.5000],"));
  EXPECT_THAT(r.err, HasSubstr("after:  c = tensor([[4.5000, 4.5000, 4.5000, 4.5000],"));
  EXPECT_THAT(r.err, HasSubstr("dtype=float32)"));
}

TEST(HookProcess, SyncExecKeepsResults) {
  const auto plain = run({HOOK_PROBE_PATH, "ops"});
  const auto r = run({HOOK_PROBE_PATH, "ops"}, preload({{"OP_SYNC_EXEC", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(r.out, plain.out);
  EXPECT_THAT(r.err, HasSubstr("opscope: option OP_SYNC_EXEC=1"));
}

// Whole tensors and statistics (whose calls, finished by host functions on the device queue, are waited
// for at the signal too).
TEST(HookProcess, ACrashStillFlushesTheTools) {
  for (const auto& [mode, summary] : {std::pair{"tensors", "opscope: captured 2 ops"},
                                      std::pair{"stats", "opscope: statistics of 2 ops (4 tensors)"}}) {
    SCOPED_TRACE(mode);
    const fs::path dir = tempDir("crash");
    const auto r = run({HOOK_PROBE_PATH, "crash"}, preload({{"OP_CAPTURE", "1"},
                                                            {"OP_CAPTURE_MODE", mode},
                                                            {"OPSCOPE_RESULT_DIR", dir.string()},
                                                            opscope_test::kSanitizerCrashOptions}));
    EXPECT_EQ(r.signal, SIGSEGV) << r.all();
    EXPECT_THAT(r.err, HasSubstr(summary));
    bool found = false;
    for (const auto& entry : fs::recursive_directory_iterator(dir))
      found |= entry.path().filename() == "capture.db";
    EXPECT_TRUE(found);
    fs::remove_all(dir);
  }
}

// A child forked from a traced process is not traced (the tools' threads and files are the parent's), and the
// runtime refuses its calls with the reason (ForkDeathTest): it exits 0; the parent's capture is whole.
TEST(HookProcess, AForkedChildRunsUntracedAndTheParentsCaptureIsComplete) {
  const fs::path dir = tempDir("fork");
  const auto r = run({HOOK_PROBE_PATH, "fork"}, preload({{"OP_CAPTURE", "1"},
                                                         {"OPSCOPE_RESULT_DIR", dir.string()},
                                                         opscope_test::kSanitizerCrashOptions}));
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("child exit 0"));
  // One summary: the parent's fill, add and refused add; the child's refused fill is not captured.
  EXPECT_EQ(linesStartingWith(r.err, "opscope: captured ").size(), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("opscope: captured 3 ops"));
  fs::remove_all(dir);
}

TEST(HookMnist, LossesAreBitIdenticalUnderTheHook) {
  const std::vector<std::string> cmd = {MNIST_TRAIN_PATH, "--steps",        "8", "--batch-size", "16",
                                        "--no-eval",      "--log-interval", "1"};
  const auto plain = run(cmd);
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  const auto expected = lossLines(plain.out);
  ASSERT_EQ(expected.size(), 8u) << plain.out;
  const fs::path dir = tempDir("mnist");
  const std::vector<std::pair<std::string, Env>> modes = {
      {"all tools off", {}},
      {"OP_DUMP_ARGS=1", {{"OP_DUMP_ARGS", "1"}}},
      {"OP_SYNC_EXEC=1", {{"OP_SYNC_EXEC", "1"}}},
      {"OP_CAPTURE=1", {{"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", dir.string()}}},
  };
  for (const auto& [mode, env] : modes) {
    const auto r = run(cmd, preload(env));
    ASSERT_EQ(r.exit_code, 0) << mode << "\n" << r.all();
    EXPECT_EQ(lossLines(r.out), expected) << mode;
    if (mode == "OP_DUMP_ARGS=1") {
      // One line per op: the first ops of a step are the two convolutions.
      EXPECT_GT(linesStartingWith(r.err, "opscope: op #").size(), 8u * 20);
      EXPECT_THAT(r.err, HasSubstr("conv2d_forward (mluopConvolutionForward)"));
      EXPECT_THAT(r.err, HasSubstr("sgd_step (mluopSgdStep)"));
    }
  }
  fs::remove_all(dir);
}

// opscope.h's framework frames, declared by a C++ program as a framework would: each library call is
// recorded with its site (capture.db's sites) and framework ops. A backward call on another thread takes
// its forward's module, line and op through the graph node; the engine's unnamed frame around it gives its
// own calls the node's site and is not among the ops; an op frame's end closes a module left open in it.
TEST(HookProcess, FrameworkFramesGiveEachCallItsSite) {
  const fs::path root = fs::temp_directory_path() / ("opscope-framework-" + std::to_string(getpid()));
  fs::remove_all(root);
  const auto r = run({HOOK_PROBE_PATH, "framework"},
                     preload({{"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  fs::path dir;
  for (const auto& entry : fs::directory_iterator(root)) dir = entry.path();
  const auto db = run({"/usr/bin/sqlite3", (dir / "capture.db").string(),
                       "SELECT o.seq, o.thread, ifnull(o.framework_op, '-'), ifnull(s.module, '-'), "
                       "ifnull(s.source, '-'), ifnull(s.forward_op, '-') FROM ops o LEFT JOIN sites s USING "
                       "(site_id) ORDER BY o.seq"});
  EXPECT_EQ(db.out,
            "1|0|aten::fill_|net|probe.py:7 in step|\n"
            "2|1|FillBackward0|net|probe.py:7 in step|aten::fill_\n"
            "3|1|-|net|probe.py:7 in step|aten::fill_\n"
            "4|0|-|-|-|-\n")
      << db.err;
  fs::remove_all(root);
}

// opscope.h's regions from a C++ program under a plain hook (no tool in the environment): a region of every
// thread takes the calls of another thread too, one of the calling thread does not; a region's list selects
// its calls; the calls outside every region are not captured; each captured call is labelled with its
// region; an unknown tool, a bad list and a bad option are refused with the reason.
TEST(HookProcess, RegionsSwitchAToolOnForTheCallsTheyCover) {
  const fs::path root = fs::temp_directory_path() / ("opscope-regions-" + std::to_string(getpid()));
  fs::remove_all(root);
  const auto r = run({HOOK_PROBE_PATH, "regions"}, preload({{"OPSCOPE_RESULT_DIR", root.string()}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("regions 1 2 3\n"));
  EXPECT_THAT(r.out, HasSubstr("coverage: 0 no tool 'coverage' for a region (capture, compare, fallback"));
  EXPECT_THAT(r.out, HasSubstr("compare: 0 list: invalid regular expression 'conv2d(' (item 2)"));
  EXPECT_THAT(r.out, HasSubstr("capture: 0 OP_CAPTURE_MODE: 'statistics' is not a capture mode"));
  fs::path dir;
  for (const auto& entry : fs::directory_iterator(root)) dir = entry.path();
  const auto db = run({"/usr/bin/sqlite3", (dir / "capture.db").string(),
                       "SELECT o.name, o.thread > 0, ifnull(o.region, '-') FROM ops o ORDER BY o.seq"});
  EXPECT_EQ(db.out,
            "fill|0|capture#1\n"
            "fill|1|capture#1\n"
            "fill|0|mine\n"
            "add|0|capture#3\n")
      << db.err;
  fs::remove_all(root);
}

// Threads that share one queue and change one tensor in place: every tool that reads a call's tensors around
// it (auto-compare's inputs and reference, capture's copies, memcheck's checks) sees them as the op does, so
// 8 threads x 50 in-place adds under --compare --capture --memcheck give the right sum, no failed compare,
// captured inputs that are each the sum before the add, and no memory error.
// OpenBLAS falls back to its Prescott kernels on a CPU model it does not know (this machine's virtual "Intel
// Xeon Processor"): opscope run then names the CPU's kernels for the program (OPENBLAS_CORETYPE), says so,
// and leaves the program's OPENBLAS_NUM_THREADS as it was; a core type the caller set is kept as it is.
TEST(HookProcess, OpscopeRunNamesOpenBlasKernelsOnlyWhenOpenBlasWouldFallBack) {
  const fs::path root = fs::temp_directory_path() / ("opscope-openblas-" + std::to_string(getpid()));
  const std::vector<std::string> shell = {"/bin/sh", "-c",
                                          "echo \"core=${OPENBLAS_CORETYPE-unset} "
                                          "threads=${OPENBLAS_NUM_THREADS-unset}\""};
  std::vector<std::string> argv = {OPSCOPE_PATH, "run", "--out", root.string(), "--"};
  argv.insert(argv.end(), shell.begin(), shell.end());
  const auto chosen = run(argv, {{"OPENBLAS_NUM_THREADS", "3"}});
  ASSERT_EQ(chosen.exit_code, 0) << chosen.all();
  EXPECT_THAT(chosen.out, HasSubstr(" threads=3\n"));
  const std::string said = "opscope: OPENBLAS_CORETYPE=";
  if (const auto at = chosen.err.find(said); at != std::string::npos) {
    const std::string core =
        chosen.err.substr(at + said.size(), chosen.err.find(':', at + said.size()) - at - said.size());
    EXPECT_TRUE(core == "SkylakeX" || core == "Haswell") << core;
    EXPECT_THAT(chosen.out, HasSubstr("core=" + core + " ")) << chosen.all();
  } else {
    const char* parent = std::getenv("OPENBLAS_CORETYPE");
    EXPECT_THAT(chosen.out, HasSubstr(std::string("core=") + (parent != nullptr ? parent : "unset") + " "));
  }
  const auto kept = run(argv, {{"OPENBLAS_CORETYPE", "Haswell"}});
  ASSERT_EQ(kept.exit_code, 0) << kept.all();
  EXPECT_THAT(kept.out, HasSubstr("core=Haswell "));
  EXPECT_THAT(kept.err, ::testing::Not(HasSubstr(said)));
  fs::remove_all(root);
}

TEST(HookProcess, ThreadsSharingAQueueInPlaceGiveNoFalseFindings) {
  const fs::path root = fs::temp_directory_path() / ("opscope-shared-queue-" + std::to_string(getpid()));
  fs::remove_all(root);
  const auto r = run({OPSCOPE_PATH, "run", "--compare", "--capture", "--memcheck", "--out", root.string(),
                      "--", HOOK_PROBE_PATH, "shared_queue", "8", "50"});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("values 400 400\n"));
  EXPECT_THAT(r.err, HasSubstr("402 passed, 0 failed")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("0 memory errors")) << r.err;
  fs::path dir;
  for (const auto& entry : fs::directory_iterator(root)) dir = entry.path();
  // The captured adds, in the order they ran: each one's input a is the previous one's output.
  const auto db =
      run({"/usr/bin/sqlite3", (dir / "capture.db").string(),
           "SELECT count(*), count(DISTINCT o.seq) FROM ops o WHERE o.name = 'add' AND o.captured"});
  EXPECT_EQ(db.out, "400|400\n") << db.err;
  // Each captured add's output is its captured input plus one: replayed, all 400 are bit-identical.
  const auto replay = run({OP_REPLAY_PATH, dir.string(), "--name", "add", "--acc_check"});
  EXPECT_EQ(replay.exit_code, 0) << replay.all();
  EXPECT_THAT(replay.out, HasSubstr("replayed 400 ops: 400 of 400 outputs bit-identical to the capture"));
  fs::remove_all(root);
}

// The launcher's odds and ends: every result directory a run made is listed (the program's, and one by a
// program it ran before exec'ing the next), and OPSCOPE_HOOK_LIB naming a file that is no shared library is
// said at once, not as a run that never used the MLU.
TEST(HookProcess, TheLauncherListsEveryResultDirectoryAndRefusesAHookThatIsNone) {
  const fs::path root = fs::temp_directory_path() / ("opscope-launcher-dirs-" + std::to_string(getpid()));
  fs::remove_all(root);
  const std::string probe = HOOK_PROBE_PATH;
  const auto r = run({OPSCOPE_PATH, "run", "--capture", "--out", root.string(), "--", "/bin/sh", "-c",
                      probe + " ops > /dev/null; exec " + probe + " ops > /dev/null"});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  std::size_t made = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    ++made;
    EXPECT_THAT(r.err, HasSubstr("opscope: results in " + entry.path().string() + "\n")) << r.err;
  }
  EXPECT_EQ(made, 2u);
  const auto bad = run({OPSCOPE_PATH, "run", "--capture", "--out", root.string(), "--", probe, "ops"},
                       {{"OPSCOPE_HOOK_LIB", "/etc/hostname"}});
  EXPECT_EQ(bad.exit_code, 2) << bad.all();
  EXPECT_THAT(bad.err, HasSubstr("the hook library '/etc/hostname' is not a shared library")) << bad.err;
  fs::remove_all(root);
}
