# opscope_results — the readers of result files that the report (report/) and the offline analyses
# (analysis/) share, beside the files' contracts (include/opscope/results/): the bounded reader of untrusted
# JSON (json_input.h), the one trace reader (trace_reader.h), a run folder's rank directories
# (run_folder.h), the CSV files (csv.h) and capture.db opened untrusted (capture_db.h, header-only). Its own file: the fuzzing
# build (the report alone) includes it too.
add_library(opscope_results STATIC ${CMAKE_CURRENT_LIST_DIR}/src/results/trace_reader.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/src/results/run_folder.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/src/results/csv.cpp)
target_include_directories(opscope_results PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include
                                           ${PROJECT_SOURCE_DIR}/runtime/include)
target_link_libraries(opscope_results PUBLIC nlohmann_json::nlohmann_json fmt::fmt PRIVATE ZLIB::ZLIB)
