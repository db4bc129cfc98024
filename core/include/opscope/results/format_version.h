// format_version.h — every result file opscope writes says which version of its format it is in
// ("format_version", an integer from 1; a file written before versions were stored has none and is version
// 1). A reader compiled against a file's contract (the other headers of this folder) reads the versions up
// to the contract's and refuses a newer file with a message that says so, instead of misreading it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace opscope::results {

inline constexpr std::string_view kFormatVersionKey = "format_version";

// "" when `version` is one a reader of versions up to `reads` knows; else why the file is refused.
inline std::string formatVersionError(std::string_view file, std::int64_t version, std::int64_t reads) {
  if (version >= 1 && version <= reads) return {};
  if (version < 1)
    return std::string(file) + ": format_version " + std::to_string(version) + " is not a version";
  return std::string(file) + " is in format version " + std::to_string(version) +
         ", newer than this opscope reads (" + std::to_string(reads) +
         "): it was written by a newer opscope; read it with that one";
}

// The same for a JSON object read from the file: its "format_version" member (none: version 1; not an
// integer: refused).
inline std::string formatVersionError(std::string_view file, const nlohmann::json& object,
                                      std::int64_t reads) {
  if (!object.is_object()) return {};
  const auto it = object.find(kFormatVersionKey);
  if (it == object.end()) return {};
  if (!it->is_number_integer()) return std::string(file) + ": format_version is not an integer";
  return formatVersionError(file, it->get<std::int64_t>(), reads);
}

}  // namespace opscope::results
