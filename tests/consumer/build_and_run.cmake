# cmake -DGRAPE_ROOT=... -DDIR=... -DCXX=... [-DLAUNCHER=ccache] -P build_and_run.cmake
# Checks that tests/consumer says what the README's recipe says, then configures it in a fresh DIR
# (checker only: no OpenMP, and as a subproject no CLI, tests or benchmarks), builds it Release
# without -g on two jobs and runs it.
file(READ ${GRAPE_ROOT}/README.md readme)
file(READ ${GRAPE_ROOT}/tests/consumer/CMakeLists.txt project)
string(REGEX MATCH "```cmake\n([^`]*)```" recipe "${readme}")
string(REPLACE "path/to/grape" "\${GRAPE_ROOT}" recipe "${CMAKE_MATCH_1}")
string(REPLACE "your_target" "consumer" recipe "${recipe}")
string(REPLACE "\n" ";" recipe "${recipe}")
if(NOT recipe)
  message(FATAL_ERROR "consumer: README.md has no ```cmake recipe")
endif()
foreach(line IN LISTS recipe)
  string(REGEX REPLACE "#.*" "" line "${line}")
  string(STRIP "${line}" line)
  string(FIND "${project}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "consumer: README.md's recipe line '${line}' is not in tests/consumer/CMakeLists.txt")
  endif()
endforeach()

file(REMOVE_RECURSE ${DIR})
set(options -DGRAPE_ROOT=${GRAPE_ROOT} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DGRAPE_OPENMP=OFF)
if(LAUNCHER)
  list(APPEND options -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
foreach(step "configure;${CMAKE_COMMAND};-S;${GRAPE_ROOT}/tests/consumer;-B;${DIR};${options}"
             "build;${CMAKE_COMMAND};--build;${DIR};-j2"
             "run;${DIR}/consumer")
  list(POP_FRONT step name)
  execute_process(COMMAND ${step} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer: ${name} failed (${rc})")
  endif()
endforeach()
