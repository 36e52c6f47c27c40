# The built-ins' names, read from the one list in include/grape/builtins.hpp (GRAPE_BUILTINS), for
# the units the build generates per built-in (src/CMakeLists.txt: the checker's; python/CMakeLists.txt:
# the module's kernels). Editing the list re-runs CMake.
function(grape_builtin_names out)
  set(list_file ${PROJECT_SOURCE_DIR}/include/grape/builtins.hpp)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${list_file})
  file(READ ${list_file} text)
  if(NOT text MATCHES "#define GRAPE_BUILTINS\\(X\\)([^\n]*\\\\\n)*[^\n]*\n")
    message(FATAL_ERROR "grape: ${list_file} has no GRAPE_BUILTINS(X) list")
  endif()
  string(REGEX MATCHALL "X\\(([a-z0-9_]+)\\)" entries "${CMAKE_MATCH_0}")
  set(names "")
  foreach(entry IN LISTS entries)
    string(REGEX REPLACE "X\\(([a-z0-9_]+)\\)" "\\1" name "${entry}")
    list(APPEND names ${name})
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()
