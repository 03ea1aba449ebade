# CMake package file: find_package(kiln) then link kiln::kiln_shared or kiln::kiln_static, and
# kiln::kiln_models for the model families (<lm/lm.h>, <gpt2/gpt2.h>...).
include(CMakeFindDependencyMacro)
find_dependency(PkgConfig)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
find_dependency(Threads)
include(${CMAKE_CURRENT_LIST_DIR}/kilnTargets.cmake)
