// Tests of the norm ops (filled in by issue 4).
#include <gtest/gtest.h>
