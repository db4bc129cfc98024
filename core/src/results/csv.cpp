#include <opscope/results/csv.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace opscope::results {

std::vector<std::string> splitCsvLine(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

CsvReader::CsvReader(const std::filesystem::path& path, const std::vector<std::string>& needed)
    : path_(path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.filename().string()));
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(fmt::format("{}: empty", path.filename().string()));
  header_ = splitCsvLine(line);
  for (const std::string& name : needed) {
    if (std::find(header_.begin(), header_.end(), name) == header_.end()) {
      throw std::runtime_error(fmt::format("{}: no column '{}'", path.filename().string(), name));
    }
  }
}

std::size_t CsvReader::column(std::string_view name) const {
  return static_cast<std::size_t>(std::find(header_.begin(), header_.end(), name) - header_.begin());
}

std::optional<std::size_t> CsvReader::optionalColumn(std::string_view name) const {
  const std::size_t i = column(name);
  return i < header_.size() ? std::optional<std::size_t>(i) : std::nullopt;
}

void CsvReader::forEach(const std::function<void(const std::vector<std::string>&)>& row) {
  std::ifstream in(path_);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> fields = splitCsvLine(line);
    if (fields.size() < header_.size()) {
      ++malformed_;
      continue;
    }
    row(fields);
  }
}

}  // namespace opscope::results
