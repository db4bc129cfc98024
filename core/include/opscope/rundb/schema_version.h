// schema_version.h — the capture.db schema versions this build writes and reads (meta.schema_version):
// one definition for the writer, op-replay's reader and the report's and the analyses'.
#pragma once

namespace opscope::rundb {

// Version 2 added runs.world_size and the collectives tables, version 3 ops.framework_op, version 4 the
// sites table and ops.site_id, version 5 ops.region, version 6 compare_results.op_class, max_ulp and
// mean_ulp; readers take 1 to 5 as well (a capture made before has no collectives, no framework ops, no
// sites, no regions, no op classes or ULPs).
inline constexpr int kSchemaVersion = 6;
inline constexpr int kOldestSchemaVersion = 1;

}  // namespace opscope::rundb
