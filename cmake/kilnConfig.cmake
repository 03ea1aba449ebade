# CMake package file: find_package(kiln) then link kiln::kiln_shared or kiln::kiln_static.
include(CMakeFindDependencyMacro)
find_dependency(PkgConfig)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_dependency(OpenMP COMPONENTS C)
find_dependency(Threads)
include(${CMAKE_CURRENT_LIST_DIR}/kilnTargets.cmake)
