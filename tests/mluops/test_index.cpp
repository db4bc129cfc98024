// Tests of the index ops (filled in by issue 4).
#include <gtest/gtest.h>
