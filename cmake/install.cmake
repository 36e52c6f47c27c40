# `cmake --install build --prefix P`: the headers, the libraries behind grape::grape and
# grape::check, the CLI, and the CMake package, so that another project's
# `find_package(grape CONFIG REQUIRED)` gives the same two targets as add_subdirectory does
# (README, "Use grape from your project"; tests/consumer_installed is that project).
include(CMakePackageConfigHelpers)
set(GRAPE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/grape)

set_target_properties(grape_core PROPERTIES EXPORT_NAME core)
set_target_properties(grape_headers PROPERTIES EXPORT_NAME headers)
set_target_properties(grape_kernel_common PROPERTIES EXPORT_NAME kernel_common)
set_target_properties(grape_cpu_kernels PROPERTIES EXPORT_NAME cpu_kernels)
set_target_properties(grape_check_report PROPERTIES EXPORT_NAME check_report)
install(TARGETS grape_core grape_headers grape_kernel_common grape_cpu_kernels grape_check_report grape_library grape_checker
        EXPORT grapeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET grape)
  install(TARGETS grape RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/grape ${PROJECT_SOURCE_DIR}/checker/grape
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
# The kernel headers keep their `#include "common/..."`, `"cpu/..."` and `"cuda/..."` spellings under a directory
# of grape's own: <prefix>/include/grape_kernels is on grape::cpu_kernels' installed include path,
# where common/, cpu/ and cuda/ straight under <prefix>/include would claim generic names in a shared
# prefix such as /usr/local. The checker's headers (checker/) include the host-side CUDA
# headers (the device bodies it emulates, the storage types), so those .hpp go too; the .cuh
# device code and the CUDA library are not part of grape::grape or grape::check.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/common ${PROJECT_SOURCE_DIR}/kernels/cpu ${PROJECT_SOURCE_DIR}/kernels/cuda
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/grape_kernels FILES_MATCHING PATTERN "*.hpp")

install(EXPORT grapeTargets NAMESPACE grape:: DESTINATION ${GRAPE_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/grapeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/grapeConfig.cmake
                              INSTALL_DESTINATION ${GRAPE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/grapeConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/grapeConfig.cmake ${PROJECT_BINARY_DIR}/grapeConfigVersion.cmake
        DESTINATION ${GRAPE_INSTALL_CMAKEDIR})
