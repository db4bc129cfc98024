#include <opscope/gunzip.h>
#include <opscope/private_file.h>
#include <opscope/trace_repair_file.h>

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace opscope {

std::string repairedTraceName(const std::string& in) {
  return in.ends_with(".tmp") ? in.substr(0, in.size() - 4) : in + ".repaired.json";
}

std::string repairTraceFile(const std::string& in, const std::string& out, RepairedTrace* result) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(out, ec))) {
    return fmt::format("{} exists; not replaced", out);
  }
  const bool gzip =
      in.ends_with(".gz") || in.ends_with(".gz.tmp");  // OP_TRACE_GZIP: inflated as far as it goes
  RepairedTrace repaired;
  try {
    std::string text;
    if (gzip) {
      text = gunzipFile(in, std::size_t{4} << 30).text;
    } else {
      std::ifstream file(in, std::ios::binary);
      if (!file) throw std::runtime_error("cannot read it");
      text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    repaired = repairTrace(text);
  } catch (const std::exception& e) {
    return fmt::format("cannot repair {}: {}", in, e.what());
  }
  // Written straight to OUT (which does not exist), never through OUT.tmp: that may be the input's name.
  UniqueFile f = createPrivateFile(out);
  if (f == nullptr) return fmt::format("cannot write {}: {}", out, std::strerror(errno));
  bool written = true;
  if (out.ends_with(".gz")) {
    const int fd = dup(fileno(f.get()));
    gzFile gz = fd < 0 ? nullptr : gzdopen(fd, "wb6");
    written =
        gz != nullptr && gzwrite(gz, repaired.json.data(), static_cast<unsigned>(repaired.json.size())) ==
                             static_cast<int>(repaired.json.size());
    if (gz != nullptr) {
      written = gzclose(gz) == Z_OK && written;
    } else if (fd >= 0) {
      ::close(fd);
    }
  } else {
    std::fwrite(repaired.json.data(), 1, repaired.json.size(), f.get());
  }
  if (std::string error = closeChecked(std::move(f), out); !error.empty() || !written) {
    if (error.empty()) error = "cannot write " + out + ": the compressed write failed";
    std::filesystem::remove(out, ec);
    return error;
  }
  if (result != nullptr) *result = std::move(repaired);
  return "";
}

}  // namespace opscope
