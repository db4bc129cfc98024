// private_file.h — how opscope writes what it writes: result directories nobody can predict or pre-create,
// private to the user (0700), and files private to the user (0600, whatever the umask), never written
// through a symlink and never into a file someone else made. A capture.db holds the program's inputs and
// weights; run.json its command line and environment options.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace opscope {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

// Creates path for writing, mode 0600. An entry of that name is removed first (unlink removes a symlink,
// never what it points to), then the file is made with O_CREAT | O_EXCL | O_NOFOLLOW: a symlink or file
// raced in between is an error, never followed or reused. Null with errno set on failure.
UniqueFile createPrivateFile(const std::string& path);

// The same for a tool's result file that it cannot work without (autocompare.csv, perturb.csv): on failure
// the write error is noted (noteWriteError) and std::runtime_error thrown, "cannot write <path>: <reason>".
UniqueFile createResultFile(const std::string& path);

// Closes f, reporting a failed write or close (a full disk shows at fclose): "" when all went well, else
// "cannot write <path>: <reason>".
std::string closeChecked(UniqueFile f, const std::string& path);

// Writes text to path whole, or not at all: into path.tmp (made by createPrivateFile), renamed into place
// (rename replaces a symlink at path, it does not follow it). "" when written, else the reason, naming the
// file ("cannot write .../run.json: No space left on device").
std::string writePrivateFile(const std::string& path, std::string_view text);

// Writes text over path's own bytes, padded with spaces to its length (the last a newline if text's is), when
// path is a regular file (not a symlink) at least as long: the last resort of a file whose first version was
// made long enough in advance (run.json), so that a full disk cannot keep its final version out. "" when
// written, else the reason.
std::string overwriteInPlace(const std::string& path, std::string_view text);

// The result writes of this process that failed, each "cannot write <path>: <reason>", in order (the first
// 64): closeChecked and writePrivateFile note theirs, a writer that fails another way (SQLite) calls
// noteWriteError. The hook lists them in run.json's "write_errors", so that a reader of the results knows
// which are missing or cut short, and why. (Process-wide on purpose: failures are facts about the run,
// whichever tool met them.)
void noteWriteError(const std::string& message);
std::vector<std::string> writeErrors();

// Makes a new directory <parent>/<base>-XXXXXX (six random characters, as mkdtemp), mode 0700, creating
// parent (and its parents) when missing; returns its path. Nobody can have made it before: a planted
// directory or symlink at a predictable name is never used. Throws std::runtime_error with the reason.
std::string createPrivateDir(const std::string& parent, const std::string& base);

// Makes `path` a directory of this user's, mode 0700, that several processes share (the ranks' run folder):
// made when missing (its parent too), taken when it is already there as a real directory (not a symlink)
// owned by this user and closed to others; anything else throws, naming what is wrong.
void ensureSharedPrivateDir(const std::string& path);

}  // namespace opscope
