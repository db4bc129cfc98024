# The accuracy metrics alone (compare/metrics.h), a library of their own: op-replay, auto-compare and
# `opscope diff` (analysis/) use them.
add_library(opscope_metrics STATIC ${CMAKE_CURRENT_LIST_DIR}/src/metrics.cpp)
# Element decoding and the Tolerance type are shared with the hook (opscope/tensor_snapshot.h header-only
# part, opscope/tolerance.h).
target_include_directories(opscope_metrics PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include
                                           ${PROJECT_SOURCE_DIR}/runtime/include ${PROJECT_SOURCE_DIR}/core/include)
target_link_libraries(opscope_metrics PRIVATE fmt::fmt)
# The metrics loops run over every element auto-compare checks: vectorized by GCC's full cost model (-O2's
# "very cheap" one leaves the NaN/infinity count scalar, at a third of its speed). A GCC flag: the fuzzing
# build's clang does not take it.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/src/metrics.cpp PROPERTIES COMPILE_OPTIONS
                                                                          "-fvect-cost-model=dynamic")
endif()
