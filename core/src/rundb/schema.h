// schema.h — the tables of capture.db (DESIGN.md "Outputs", plus what capture and replay need). The writer
// fills meta with the format and kSchemaVersion (schema_version.h) after it makes them.
#pragma once

#include <opscope/rundb/schema_version.h>

namespace opscope::rundb {

inline constexpr const char* kSchema = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE runs(run_id INTEGER PRIMARY KEY, pid INTEGER, rank INTEGER, command_line TEXT, start_time TEXT,
                  start_unix_ns INTEGER, opscope_version TEXT, options TEXT, world_size INTEGER);
CREATE TABLE ops(op_id INTEGER PRIMARY KEY, seq INTEGER, name TEXT, symbol TEXT, thread INTEGER,
                 queue INTEGER, device INTEGER, host_start_ns INTEGER, host_dur_ns INTEGER,
                 device_dur_ns INTEGER, status INTEGER, fallback INTEGER, captured INTEGER,
                 framework_op TEXT, site_id INTEGER, region TEXT);
CREATE INDEX ops_seq ON ops(seq);
-- ops.region: the label of the program's region the call was made in (opscope.compare(): "compare#1"), NULL
-- outside every region.
-- Where in the program each op was called, as its framework declared it (torch_mlu: nn.Module path, the
-- program's Python line, and for a backward call the forward op that made its graph node), each distinct
-- site once; ops.site_id is NULL when there is none.
CREATE TABLE sites(site_id INTEGER PRIMARY KEY, module TEXT, source TEXT, forward_op TEXT);
CREATE INDEX ops_name ON ops(name);
-- Tensor contents, each distinct content stored once (weights read every step share one row).
CREATE TABLE blobs(blob_id INTEGER PRIMARY KEY, hash INTEGER, nbytes INTEGER, data BLOB);
CREATE TABLE tensor_refs(op_id INTEGER, role TEXT, arg_index INTEGER, arg_name TEXT, dtype TEXT,
                         layout INTEGER, shape TEXT, strides TEXT, nbytes INTEGER, blob_id INTEGER);
CREATE INDEX tensor_refs_op ON tensor_refs(op_id);
-- DESIGN.md's tensors table: np.frombuffer(data, dtype).reshape(json.loads(shape)).
CREATE VIEW tensors AS
  SELECT r.op_id, r.role, r.arg_index, r.arg_name, r.dtype, r.shape, r.strides, r.nbytes, b.data
  FROM tensor_refs r JOIN blobs b ON b.blob_id = r.blob_id;
-- OP_CAPTURE_MODE=stats: per tensor of every op call (ops.captured 0 unless its tensors were kept too). min,
-- max, mean and l2 over the finite elements; nan and inf count the others; checksum: XXH3-64 of the packed
-- bytes as 16 hex digits.
CREATE TABLE tensor_stats(op_id INTEGER, role TEXT, arg_index INTEGER, arg_name TEXT, dtype TEXT, shape TEXT,
                          numel INTEGER, min REAL, max REAL, mean REAL, l2 REAL, nan INTEGER, inf INTEGER,
                          checksum TEXT);
CREATE INDEX tensor_stats_op ON tensor_stats(op_id);
CREATE TABLE scalars(op_id INTEGER, name TEXT, value TEXT);
CREATE INDEX scalars_op ON scalars(op_id);
-- The transfers of the collective library (libmlucl), one row per call in the order the program made them:
-- comm is the communicator's id as decimal text (mluclCommGetId, the same on every rank: with seq it names
-- one transfer across the ranks' captures), seq the number libmlucl checks across ranks (0 for a refused
-- call), op the reduction (NULL when none), peer the broadcast's root or the send / recv peer (else -1),
-- op_seq the seq of the program's last op call before it.
CREATE TABLE collectives(collective_id INTEGER PRIMARY KEY, comm TEXT, seq INTEGER, name TEXT, symbol TEXT,
                         rank INTEGER, world_size INTEGER, count INTEGER, dtype TEXT, op TEXT, peer INTEGER,
                         op_seq INTEGER, thread INTEGER, queue INTEGER, host_start_ns INTEGER,
                         host_dur_ns INTEGER, status INTEGER);
CREATE INDEX collectives_comm_seq ON collectives(comm, seq);
-- What a transfer read (role 'send', before it ran) and wrote ('recv', after it), 1-D: statistics as in
-- tensor_stats, and blob_id the contents (NULL in OP_CAPTURE_MODE=stats, which keeps statistics only).
CREATE TABLE collective_buffers(collective_id INTEGER, role TEXT, dtype TEXT, numel INTEGER, min REAL,
                                max REAL, mean REAL, l2 REAL, nan INTEGER, inf INTEGER, checksum TEXT,
                                nbytes INTEGER, blob_id INTEGER);
CREATE INDEX collective_buffers_id ON collective_buffers(collective_id);
CREATE TABLE compare_results(op_id INTEGER, arg_name TEXT, allclose INTEGER, max_abs_diff REAL,
                             max_rel_diff REAL, mae REAL, cosine REAL, mismatch_ratio REAL, diff1 REAL,
                             diff2 REAL, diff3 REAL, dev_nan INTEGER, ref_nan INTEGER, atol REAL, rtol REAL,
                             verdict TEXT, op_class TEXT, max_ulp REAL, mean_ulp REAL);
)sql";

}  // namespace opscope::rundb
