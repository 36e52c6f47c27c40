# grape_add_python_encodings: a project's own C++ encoding types built, at the project's build time,
# into the libraries grape.load_encoding would compile at run time, with their checkers and a
# manifest that grape.load_encodings(path) opens. Carried by the Python package (grape/sdk/cmake),
# so the libraries are built against the very sdk of the grape they are loaded into:
#
#   find_package(Python 3.9 REQUIRED COMPONENTS Interpreter)
#   execute_process(COMMAND ${Python_EXECUTABLE} -c "import grape; print(grape.cmake_dir())"
#                   OUTPUT_VARIABLE grape_cmake_dir OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
#   include(${grape_cmake_dir}/grape_python_encodings.cmake)
#   grape_add_python_encodings(my_encodings HEADERS my_rope.hpp TYPES "my_rope<>" [NAMES my_rope]
#                              [INCLUDE_DIRS dir...])
#
# Per type: a MODULE library <name>.so and an executable <name>_check in <build>/<target>/, and
# <build>/<target>/encodings.json listing them. HEADERS holds one header for every type, or one per
# type; NAMES (optional) registers each under another name than its own.
get_filename_component(_grape_sdk "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

# build.txt: the compiler, flags and libraries the sdk's libraries were built with.
file(STRINGS ${_grape_sdk}/build.txt _grape_build_lines)
foreach(_line IN LISTS _grape_build_lines)
  if(_line MATCHES "^([a-z_]+)=(.*)$")
    set(_grape_build_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()

function(_grape_encoding_target target name kind source)
  if(kind STREQUAL "library")
    add_library(${target} MODULE ${source})
    set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME ${name})
    target_compile_options(${target} PRIVATE -O3)
    target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL)
    target_link_libraries(${target} PRIVATE ${_grape_sdk}/lib/libgrape_cpu_kernels.a ${_grape_sdk}/lib/libgrape_kernel_common.a
                          ${_grape_sdk}/lib/libgrape_core.a ${_grape_build_libraries})
  else()
    add_executable(${target} ${source})
    set_target_properties(${target} PROPERTIES OUTPUT_NAME ${name}_check)
    target_compile_options(${target} PRIVATE -O1)
    target_link_libraries(${target} PRIVATE ${_grape_sdk}/lib/libgrape_check_report.a
                          ${_grape_sdk}/lib/libgrape_cpu_kernels.a ${_grape_sdk}/lib/libgrape_kernel_common.a
                          ${_grape_sdk}/lib/libgrape_core.a ${_grape_build_check_libraries} ${_grape_build_libraries})
  endif()
  target_compile_options(${target} PRIVATE ${_grape_build_flags})
  target_compile_definitions(${target} PRIVATE ${_grape_build_defines})
  target_include_directories(${target} PRIVATE ${_grape_sdk}/include ${_grape_sdk}/kernels ${_grape_sdk}/python_src)
  target_include_directories(${target} SYSTEM PRIVATE ${_grape_build_include_dirs})
endfunction()

function(grape_add_python_encodings target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "HEADERS;TYPES;NAMES;INCLUDE_DIRS")
  list(LENGTH arg_TYPES count)
  list(LENGTH arg_HEADERS header_count)
  list(LENGTH arg_NAMES name_count)
  if(count EQUAL 0)
    message(FATAL_ERROR "grape: grape_add_python_encodings(${target}): TYPES: give at least one C++ type")
  endif()
  if(NOT (header_count EQUAL 1 OR header_count EQUAL count))
    message(FATAL_ERROR "grape: grape_add_python_encodings(${target}): HEADERS: one for every type or one per type "
                        "(${header_count} headers, ${count} types)")
  endif()
  if(NOT (name_count EQUAL 0 OR name_count EQUAL count))
    message(FATAL_ERROR "grape: grape_add_python_encodings(${target}): NAMES: one per type (${name_count} names, "
                        "${count} types)")
  endif()
  get_filename_component(compiler "${CMAKE_CXX_COMPILER}" REALPATH)
  get_filename_component(sdk_compiler "${_grape_build_cxx}" REALPATH)
  if(NOT compiler STREQUAL sdk_compiler)
    message(WARNING "grape: grape_add_python_encodings(${target}): grape's libraries were built with ${sdk_compiler}, "
                    "this project compiles with ${compiler}: the C++ ABI of the two must agree")
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${target})
  set(entries "")
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    list(GET arg_TYPES ${i} type)
    if(header_count EQUAL 1)
      list(GET arg_HEADERS 0 header)
    else()
      list(GET arg_HEADERS ${i} header)
    endif()
    get_filename_component(header "${header}" ABSOLUTE)
    if(NOT EXISTS "${header}")
      message(FATAL_ERROR "grape: grape_add_python_encodings(${target}): HEADERS: no file ${header}")
    endif()
    if(name_count EQUAL 0)
      string(MAKE_C_IDENTIFIER "${type}" name)
      set(json_name null)
    else()
      list(GET arg_NAMES ${i} name)
      set(json_name "\"${name}\"")
    endif()
    get_filename_component(header_dir "${header}" DIRECTORY)
    foreach(kind library check)
      set(template user_encoding.tpp)
      set(t ${target}_${name})
      if(kind STREQUAL "check")
        set(template user_check.tpp)
        set(t ${target}_${name}_check)
      endif()
      file(CONFIGURE OUTPUT ${dir}/${name}_${kind}.cpp CONTENT
           "// Generated by grape_add_python_encodings for ${type} from ${header}.\n#include \"${header}\"\n#define GRAPE_USER_ENCODING ${type}\n#include \"${template}\"\n")
      _grape_encoding_target(${t} ${name} ${kind} ${dir}/${name}_${kind}.cpp)
      set_target_properties(${t} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${dir} RUNTIME_OUTPUT_DIRECTORY ${dir})
      target_include_directories(${t} PRIVATE ${header_dir} ${arg_INCLUDE_DIRS})
    endforeach()
    string(REPLACE "\"" "\\\"" json_type "${type}")
    list(APPEND entries "{\"name\": ${json_name}, \"type\": \"${json_type}\", \"header\": \"${header}\", \"library\": \"$<TARGET_FILE:${target}_${name}>\", \"checker\": \"$<TARGET_FILE:${target}_${name}_check>\"}")
    list(APPEND built ${target}_${name} ${target}_${name}_check)
  endforeach()
  list(JOIN entries ",\n " body)
  file(GENERATE OUTPUT ${dir}/encodings.json CONTENT "[${body}]\n")
  add_custom_target(${target} ALL)
  add_dependencies(${target} ${built})
endfunction()
