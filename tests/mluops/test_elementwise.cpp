#include "op_harness.h"

TEST(Placeholder_elementwise, Builds) { EXPECT_EQ(mluopGetSizeOfDataType(MLUOP_DTYPE_FLOAT), 4u); }
