# cmake -DGRAPE_ROOT=... -DDIR=... -DCXX=... [-DLAUNCHER=ccache] [-DROUTE=add_subdirectory]
#       -P build_and_run.cmake
# cmake -DROUTE=find_package -DGRAPE_ROOT=... -DDIR=... -DCXX=... [-DLAUNCHER=ccache]
#       -DGRAPE_BUILD=<grape's build dir> -DBUILT=<file,...> [-DCLI=ON] -P build_and_run.cmake
# Checks that the consumer project says what the README's recipe for ROUTE says, then builds it in a
# fresh DIR, Release (at -O1) without -g on two jobs, and runs it.
# add_subdirectory (tests/consumer): grape from source, checker only (no OpenMP, and as a subproject
# no CLI, tests or benchmarks).
# find_package (tests/consumer_installed): `cmake --install GRAPE_BUILD --prefix DIR/prefix` from
# grape's own, already built tree (BUILT: the files it installs, which must exist; nothing of grape is
# compiled here), then the project against DIR/prefix; with CLI, DIR/prefix/bin/grape must run too.
if(NOT ROUTE)
  set(ROUTE add_subdirectory)
endif()
if(ROUTE STREQUAL "add_subdirectory")
  set(project_dir ${GRAPE_ROOT}/tests/consumer)
elseif(ROUTE STREQUAL "find_package")
  set(project_dir ${GRAPE_ROOT}/tests/consumer_installed)
else()
  message(FATAL_ERROR "consumer: ROUTE is add_subdirectory or find_package, not '${ROUTE}'")
endif()

# The README's ```cmake block for this route: the one that names ROUTE.
file(READ ${GRAPE_ROOT}/README.md readme)
file(READ ${project_dir}/CMakeLists.txt project)
string(REGEX MATCH "```cmake\n([^`]*${ROUTE}[^`]*)```" recipe "${readme}")
if(NOT recipe)
  message(FATAL_ERROR "consumer: README.md has no ```cmake recipe with ${ROUTE}")
endif()
string(REPLACE "path/to/grape" "\${GRAPE_ROOT}" recipe "${CMAKE_MATCH_1}")
string(REPLACE "your_target" "consumer" recipe "${recipe}")
string(REPLACE "\n" ";" recipe "${recipe}")
foreach(line IN LISTS recipe)
  string(REGEX REPLACE "#.*" "" line "${line}")
  string(STRIP "${line}" line)
  string(FIND "${project}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "consumer: README.md's recipe line '${line}' is not in ${project_dir}/CMakeLists.txt")
  endif()
endforeach()

function(run name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer: ${name} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE ${DIR})
# -O1, not Release's -O3: the program only has to build and run (its checker at -O3 took most of
# the two consumer tests' 170 s).
set(options -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1)
if(LAUNCHER)
  list(APPEND options -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(ROUTE STREQUAL "add_subdirectory")
  set(build ${DIR})
  list(APPEND options -DGRAPE_ROOT=${GRAPE_ROOT} -DGRAPE_OPENMP=OFF)
else()
  set(build ${DIR}/build)
  set(prefix ${DIR}/prefix)
  string(REPLACE "," ";" BUILT "${BUILT}")
  foreach(file IN LISTS BUILT)
    if(NOT EXISTS ${file})
      message(FATAL_ERROR "consumer: ${file} is not built; build grape_lib (and grape) in ${GRAPE_BUILD} first")
    endif()
  endforeach()
  run(install ${CMAKE_COMMAND} --install ${GRAPE_BUILD} --prefix ${prefix})
  list(APPEND options -DCMAKE_PREFIX_PATH=${prefix})
endif()
run(configure ${CMAKE_COMMAND} -S ${project_dir} -B ${build} ${options})
if(prefix)
  # The copy just installed, not one found elsewhere on the system.
  file(STRINGS ${build}/CMakeCache.txt found REGEX "^grape_DIR:")
  string(FIND "${found}" "${prefix}/" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "consumer: found grape outside ${prefix}: ${found}")
  endif()
endif()
run(build ${CMAKE_COMMAND} --build ${build} -j2)
run(run ${build}/consumer)
if(prefix AND CLI)
  run("installed CLI" ${prefix}/bin/grape list)
endif()
