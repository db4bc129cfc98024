// gunzip.h — the text of a gzip file (trace.json.gz), as far as it goes: a file cut short (a killed run's
// trace, flushed once a second) gives what can be inflated and says it was cut. Header-only (zlib): the
// report, which is also built alone for fuzzing, and trace-check use it; the file may come from anyone.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

namespace opscope {

struct Gunzipped {
  std::string text;
  bool cut = false;  // the compressed stream ends early (or is damaged there): text is what came before
};

// Throws std::runtime_error when the file cannot be opened or inflates past max_bytes.
inline Gunzipped gunzipFile(const std::string& path, std::size_t max_bytes) {
  struct Closer {
    void operator()(gzFile f) const { gzclose(f); }
  };
  const std::unique_ptr<gzFile_s, Closer> in(gzopen(path.c_str(), "rb"));
  if (!in) throw std::runtime_error(path + ": cannot open");
  Gunzipped out;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(in.get(), buffer, sizeof buffer);
    if (n > 0) {
      if (out.text.size() + static_cast<std::size_t>(n) > max_bytes) {
        throw std::runtime_error(path + ": more than " + std::to_string(max_bytes >> 20) +
                                 " MiB once inflated");
      }
      out.text.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    int error = Z_OK;
    gzerror(in.get(), &error);
    out.cut = n < 0 || (error != Z_OK && error != Z_STREAM_END);
    break;
  }
  return out;
}

}  // namespace opscope
