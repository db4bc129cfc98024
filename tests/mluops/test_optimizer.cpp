// Tests of the optimizer ops (filled in by issue 4).
#include <gtest/gtest.h>
