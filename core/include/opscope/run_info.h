// run_info.h — the run the hook is in: process, rank, command line, start time and result directory.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

namespace opscope {

struct RunInfo {
  long pid = 0;
  // The process's rank and the job's size: RANK / WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK / _SIZE
  // (Open MPI), PMIX_RANK, PMI_RANK / PMI_SIZE (Slurm, MPICH), the first set; -1 and 0 when none is.
  int rank = -1;
  int world_size = 0;
  std::string command_line;  // /proc/self/cmdline, arguments separated by spaces
  std::int64_t start_unix_ns = 0;
  std::string start_time_iso;  // "2026-11-25T10:11:12Z"
  // <root>/<YYYYmmdd-HHMMSS>-<pid>[-rank<N>]-<XXXXXX>, or for one rank of several processes
  // <root>/<run folder>/<YYYYmmdd-HHMMSS>-rank<R>-<pid>-<XXXXXX>: the last part random (createResultDir), so
  // that nobody can predict or pre-create it. Empty when nothing writes.
  std::string result_dir;
  // The folder every rank of the job writes its result directory into (the name `opscope run` gives in
  // OPSCOPE_RUN_FOLDER, else one from the job's id: mpi-job<id>, torchrun-<id>, ranks-ppid<pid>); empty for
  // a process that is not one of several ranks.
  std::string run_folder;
  // The job this rank is part of (empty for a process that is not one of several ranks): the same for every
  // rank of one job and different for two jobs, so that the readers of a run folder two jobs share (a
  // reused OPSCOPE_RUN_FOLDER, torchrun's default rendezvous id "none") keep them apart. See jobId.
  std::string job;
  // Finishes the run's results now, as at exit (every tool's flush, then run.json with `ended` as how it
  // ended: "ended by <ended>"), for a tool that knows the process is about to be killed: the flight recorder
  // of a rank whose job another rank's collective timeout aborts (Open MPI kills the other ranks within a
  // second or two of the abort, too soon to flush). The tools flush as on a fatal signal
  // (Tool::flushOnSignal: no wait for a queue that may be stuck); later calls are forwarded unwatched. Set by
  // the hook; empty when nothing writes.
  std::function<void(const std::string& ended)> end_now;
};

// The job id of a rank (RunInfo::job): OPSCOPE_JOB_ID (`opscope run` sets it), else the MPI job's
// (PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid), else the parent process's pid and start time (torchrun's
// agent, a shell's loop: the parent every local rank shares, which no later job has); a torchrun restart's
// workers (TORCHELASTIC_RESTART_COUNT > 0) are a job of their own. Only letters, digits, '.', '_' and '-'.
std::string jobId(const char* opscope_job_id, const char* pmix_namespace, const char* ompi_jobid, long ppid,
                  const std::string& ppid_start, const char* torchrun_restart);

// The run folder's name for a rank of a job whose launcher set these variables (see RunInfo::run_folder):
// only letters, digits, '.', '_' and '-' (anything else becomes '_'), never "." or "..".
std::string runFolderName(const char* opscope_run_folder, const char* pmix_namespace, const char* ompi_jobid,
                          const char* torchrun_id, long ppid);

// The process's rank and the job's size from the variables RunInfo names: (-1, 0) when none is set. (Inline:
// the configuration's parser uses it too, and is built alone for fuzzing.)
inline std::pair<int, int> rankAndWorldSize(const std::function<const char*(const char*)>& getenv) {
  // The first of the variables that holds a whole number >= lo, else -1.
  const auto first = [&](std::initializer_list<const char*> names, long lo) -> long {
    for (const char* name : names) {
      const char* v = getenv(name);
      if (v == nullptr || *v == '\0') continue;
      char* end = nullptr;
      errno = 0;
      const long n = std::strtol(v, &end, 10);
      if (*end == '\0' && errno == 0 && n >= lo && n <= (1L << 30)) return n;
    }
    return -1;
  };
  const long rank = first({"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, 0);
  const long world = first({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1);
  return {static_cast<int>(rank), world < 0 ? 0 : static_cast<int>(world)};
}

// Fills pid, rank, command line and start time for this process, and result_dir's planned name under root
// (without its random part).
RunInfo makeRunInfo(const std::string& result_root);

// Checks before main that result directories can be made under root, making nothing that stays: root, or
// its nearest existing ancestor, must be a directory this process can create entries in (tried with a
// directory made and removed at once). Throws ConfigError naming OPSCOPE_RESULT_DIR.
void checkResultRoot(const std::string& root);

// Creates the result directory: run.result_dir plus a random suffix, mode 0700 (parents made when
// missing), and sets run.result_dir to it. Throws ConfigError naming OPSCOPE_RESULT_DIR.
void createResultDir(RunInfo& run);

}  // namespace opscope
