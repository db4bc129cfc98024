#include "op_harness.h"

TEST(Placeholder_gemm, Builds) { EXPECT_EQ(mluopGetSizeOfDataType(MLUOP_DTYPE_FLOAT), 4u); }
