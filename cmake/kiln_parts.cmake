# The parts libkiln is built from. Each part is an object library compiled with the library's
# flags and -fvisibility=hidden (only what include/kiln/ declares with KN_API is exported); the
# top level links every part into libkiln.so and libkiln.a.
#
# A new backend is one folder, src/backends/<name>/, whose CMakeLists.txt calls
#   kiln_add_backend(<name> <sources...>)
# plus one add_subdirectory(<name>) line in src/backends/CMakeLists.txt: it becomes the target
# kiln_<name> and its name is appended to the global list KILN_BACKENDS (read it with
# get_property(... GLOBAL PROPERTY KILN_BACKENDS)), from which the backends' registration is
# generated. A part that is not a backend (src/dist/: kiln_dist) calls kiln_add_part(kiln_dist
# <sources...>) and gets one add_subdirectory line in src/CMakeLists.txt.

# What every part compiles and links with (include dirs of the dependencies come with them).
add_library(kiln_deps INTERFACE)
target_include_directories(kiln_deps INTERFACE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src
  ${CMAKE_BINARY_DIR}/generated)
target_compile_options(kiln_deps INTERFACE ${KILN_WARNINGS} ${KILN_OPT_FLAGS})
target_compile_definitions(kiln_deps INTERFACE _GNU_SOURCE)
target_link_libraries(kiln_deps INTERFACE ${KILN_LINK_DEPS})

# kiln_add_part(<target> <sources...>): an object library that is part of libkiln.
function(kiln_add_part target)
  add_library(${target} OBJECT ${ARGN})
  set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET hidden)
  target_link_libraries(${target} PRIVATE kiln_deps)
  set_property(GLOBAL APPEND PROPERTY KILN_PARTS ${target})
endfunction()

# kiln_add_backend(<name> <sources...>): the part kiln_<name>, listed in KILN_BACKENDS.
function(kiln_add_backend name)
  kiln_add_part(kiln_${name} ${ARGN})
  set_property(GLOBAL APPEND PROPERTY KILN_BACKENDS ${name})
endfunction()
