// csv.h — reading the CSV files opscope writes (the report and `opscope diff` share it) (RFC 4180: a header
// line, fields quoted when they hold commas or quotes, "" for a quote inside quotes).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::results {

// Splits one line into its fields.
std::vector<std::string> splitCsvLine(std::string_view line);

// A CSV file's rows by column name. Throws std::runtime_error naming the file when it cannot be opened or
// when a column it needs is missing.
class CsvReader {
 public:
  CsvReader(const std::filesystem::path& path, const std::vector<std::string>& needed);
  // Calls row(fields) for each data row; fields are indexed by column(name). Rows with fewer fields than the
  // header are counted in malformed() and skipped.
  void forEach(const std::function<void(const std::vector<std::string>&)>& row);
  std::size_t column(std::string_view name) const;
  // The index of a column the file may lack (older files), or nothing.
  std::optional<std::size_t> optionalColumn(std::string_view name) const;
  std::size_t malformed() const { return malformed_; }

 private:
  std::filesystem::path path_;
  std::vector<std::string> header_;
  std::size_t malformed_ = 0;
};

}  // namespace opscope::results
