#include <opscope/private_file.h>

#include "../../runtime/common/no_destructor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace opscope {

namespace {

struct WriteErrors {
  std::mutex mutex;
  std::vector<std::string> messages;
};

WriteErrors& writeErrorLog() {
  static mlu::NoDestructor<WriteErrors> log;  // written from exit handlers: never destroyed
  return log.get();
}

}  // namespace

void noteWriteError(const std::string& message) {
  WriteErrors& log = writeErrorLog();
  std::lock_guard lock(log.mutex);
  if (log.messages.size() < 64) log.messages.push_back(message);
}

std::vector<std::string> writeErrors() {
  WriteErrors& log = writeErrorLog();
  std::lock_guard lock(log.mutex);
  return log.messages;
}

std::string overwriteInPlace(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  std::string error;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = fmt::format("{} is not a regular file", path);
  } else if (static_cast<std::uint64_t>(st.st_size) < text.size()) {
    error = fmt::format("{} holds {} bytes, {} are needed", path, st.st_size, text.size());
  } else {
    std::string padded(text);
    padded.resize(static_cast<std::size_t>(st.st_size), ' ');
    if (!text.empty() && text.back() == '\n') padded.back() = '\n';  // a text file still ends its last line
    std::size_t done = 0;
    while (done < padded.size()) {
      const ssize_t n = ::pwrite(fd, padded.data() + done, padded.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = fmt::format("cannot write {}: {}", path, std::strerror(n < 0 ? errno : EIO));
        break;
      }
      done += static_cast<std::size_t>(n);
    }
  }
  if (::close(fd) != 0 && error.empty())
    error = fmt::format("cannot write {}: {}", path, std::strerror(errno));
  return error;
}

UniqueFile createPrivateFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return nullptr;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  // 0600 whatever the umask (the umask can only take bits away, and none are left to add).
  std::FILE* f = ::fdopen(fd, "w");
  if (f == nullptr) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
  }
  return UniqueFile(f);
}

std::string closeChecked(UniqueFile f, const std::string& path) {
  std::FILE* raw = f.release();
  if (raw == nullptr) return fmt::format("cannot write {}: not open", path);
  // What is still buffered is written by fflush, which sets errno when it fails (a full disk shows here);
  // an earlier failed write leaves the stream's error flag.
  errno = 0;
  const bool flushed = std::fflush(raw) == 0 && std::ferror(raw) == 0;
  // An earlier write's errno is gone by now: a filesystem with no block left says what it was.
  struct statvfs fs {};
  const int flush_errno = errno != 0                                                ? errno
                          : ::fstatvfs(::fileno(raw), &fs) == 0 && fs.f_bavail == 0 ? ENOSPC
                                                                                    : EIO;
  const bool closed = std::fclose(raw) == 0;
  std::string error;
  if (!flushed) {
    error = fmt::format("cannot write {}: {}", path, std::strerror(flush_errno));
  } else if (!closed) {
    error = fmt::format("cannot write {}: {}", path, std::strerror(errno));
  }
  if (!error.empty()) noteWriteError(error);
  return error;
}

UniqueFile createResultFile(const std::string& path) {
  UniqueFile f = createPrivateFile(path);
  if (!f) {
    const std::string error = fmt::format("cannot write {}: {}", path, std::strerror(errno));
    noteWriteError(error);
    throw std::runtime_error(error);
  }
  return f;
}

std::string writePrivateFile(const std::string& path, std::string_view text) {
  // What is there already is replaced only when it is a file (or a link, which the rename replaces and never
  // follows): a FIFO, a device node, a socket or a directory the user named by mistake (`--out /dev/null`
  // as root) is left alone.
  if (struct stat st{}; ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "not a regular file";
    std::string error = fmt::format("cannot write {}: it is {}, not replaced", path, kind);
    noteWriteError(error);
    return error;
  }
  const std::string tmp = path + ".tmp";
  UniqueFile f = createPrivateFile(tmp);
  if (!f) {
    std::string error = fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
    noteWriteError(error);
    return error;
  }
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), f.get()) != text.size()) {
    // The reason is known now; closeChecked would only see the stream's error flag.
    std::string error = fmt::format("cannot write {}: {}", tmp, std::strerror(errno != 0 ? errno : EIO));
    noteWriteError(error);
    f.reset();
    ::unlink(tmp.c_str());
    return error;
  }
  if (std::string error = closeChecked(std::move(f), tmp); !error.empty()) {
    ::unlink(tmp.c_str());
    return error;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = fmt::format("cannot write {}: {}", path, std::strerror(errno));
    noteWriteError(error);
    ::unlink(tmp.c_str());
    return error;
  }
  return "";
}

std::string createPrivateDir(const std::string& parent, const std::string& base) {
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create '{}': {}", parent, ec.message()));
  // The path above the new directory is resolved once (realpath): a symbolic link there (a result root
  // under a linked home or scratch folder) is the user's own choice and is followed now, so that nothing
  // written inside ever passes one (SQLite's NOFOLLOW refuses a link in any directory of a path).
  const std::filesystem::path resolved = std::filesystem::canonical(parent, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot resolve '{}': {}", parent, ec.message()));
  std::string name = (resolved / (base + "-XXXXXX")).string();
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {  // mode 0700, O_EXCL-like: never an existing entry
    throw std::runtime_error(
        fmt::format("cannot create a directory in '{}': {}", parent, std::strerror(errno)));
  }
  return std::string(buffer.data());
}

void ensureSharedPrivateDir(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (ec)
    throw std::runtime_error(fmt::format("cannot create '{}': {}", p.parent_path().string(), ec.message()));
  if (::mkdir(path.c_str(), 0700) == 0) return;
  if (errno != EEXIST)
    throw std::runtime_error(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("cannot use '{}': {}", path, std::strerror(errno)));
  if (S_ISLNK(st.st_mode))
    throw std::runtime_error(fmt::format("'{}' is a symbolic link: not followed", path));
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(fmt::format("'{}' is not a directory", path));
  if (st.st_uid != ::geteuid()) throw std::runtime_error(fmt::format("'{}' belongs to another user", path));
  if ((st.st_mode & 077) != 0)
    throw std::runtime_error(fmt::format("'{}' is open to other users (mode {:o})", path, st.st_mode & 0777));
}

}  // namespace opscope
