// Tests of the attention ops (filled in by issue 4).
#include <gtest/gtest.h>
