#include "op_harness.h"

TEST(Placeholder_reduce, Builds) { EXPECT_EQ(mluopGetSizeOfDataType(MLUOP_DTYPE_FLOAT), 4u); }
