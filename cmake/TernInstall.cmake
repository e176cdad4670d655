# `cmake --install`: the shared and the static library, the public header, a CMake package
# (find_package(Tern CONFIG) -> Tern::tern, Tern::tern_static) and a pkg-config file (tern).
# Both package files find the install prefix relative to their own location, so an installed tree
# can be moved. The static archive needs Tern's dependencies at link time: the package files list
# them as the absolute paths this build linked.
include(CMakePackageConfigHelpers)

set(TERN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tern)
set(TERN_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/tern)

install(TARGETS tern LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tern_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/c_api.h DESTINATION ${TERN_INSTALL_INCLUDEDIR})
# The header-only C++17 wrapper, beside c_api.h: programs include "tern/tern.hpp" (the package
# files put the include directory above it on the path too).
install(FILES include/tern/tern.hpp DESTINATION ${TERN_INSTALL_INCLUDEDIR})
install(TARGETS tern_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Backend modules go beside libtern, where it looks for them first.
if(TERN_WITH_CUDA)
  # (It finds cuBLAS(Lt) and cuDNN in the toolkit it was built with: its INSTALL_RPATH.)
  install(TARGETS tern_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# The installed CLI finds the installed library wherever the tree is moved.
file(RELATIVE_PATH tern_bin_to_lib "/prefix/${CMAKE_INSTALL_BINDIR}" "/prefix/${CMAKE_INSTALL_LIBDIR}")
set_target_properties(tern_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${tern_bin_to_lib}")

# What a program linking libtern.a must link too (file paths, resolved at generation time).
set(tern_static_deps "")
if(TERN_WITH_ONEDNN)
  list(APPEND tern_static_deps "$<TARGET_LINKER_FILE:DNNL::dnnl>")
endif()
if(TERN_WITH_OPENBLAS)
  list(APPEND tern_static_deps "${TERN_OPENBLAS_LIB}")
endif()
if(TERN_WITH_ONNX)
  list(APPEND tern_static_deps "$<TARGET_LINKER_FILE:onnx_proto>"
       "$<TARGET_LINKER_FILE:protobuf::libprotobuf>")
endif()
list(APPEND tern_static_deps ${TERN_IMAGE_CODEC_LIBS})  # ImageDecoder's libjpeg, libpng...
if(OpenMP_CXX_FOUND)
  list(APPEND tern_static_deps ${OpenMP_CXX_LIBRARIES})
endif()
# The archive is C++: a C program links the C++ runtime by name.
set(tern_static_system_libs stdc++ m pthread dl)

# CMake package.
file(RELATIVE_PATH TERN_CONFIG_TO_PREFIX "/prefix/${TERN_INSTALL_CMAKEDIR}" "/prefix")
string(JOIN ";" TERN_STATIC_DEPS ${tern_static_deps} ${tern_static_system_libs})
set(TERN_SHARED_FILE "$<TARGET_FILE_NAME:tern>")
set(TERN_SHARED_SONAME "$<TARGET_SONAME_FILE_NAME:tern>")
set(TERN_STATIC_FILE "$<TARGET_FILE_NAME:tern_static>")
set(TERN_CUDA_MODULE_FILE "")
if(TERN_WITH_CUDA)
  set(TERN_CUDA_MODULE_FILE "$<TARGET_FILE_NAME:tern_cuda>")
endif()
configure_file(cmake/TernConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/TernConfig.cmake.gen @ONLY)
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/package/TernConfig.cmake
     INPUT ${CMAKE_CURRENT_BINARY_DIR}/TernConfig.cmake.gen)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/package/TernConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/package/TernConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/package/TernConfigVersion.cmake
        DESTINATION ${TERN_INSTALL_CMAKEDIR})

# pkg-config.
file(RELATIVE_PATH TERN_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
set(TERN_PC_LIBS_PRIVATE "")
set(TERN_PC_MODULES "${TERN_CUDA_MODULE_FILE}")
foreach(dep IN LISTS tern_static_deps)
  string(APPEND TERN_PC_LIBS_PRIVATE " ${dep}")
endforeach()
foreach(dep IN LISTS tern_static_system_libs)
  string(APPEND TERN_PC_LIBS_PRIVATE " -l${dep}")
endforeach()
configure_file(cmake/tern.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tern.pc.gen @ONLY)
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/package/tern.pc
     INPUT ${CMAKE_CURRENT_BINARY_DIR}/tern.pc.gen)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/package/tern.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
