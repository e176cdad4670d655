# tern_find_vulkan(FOUND_VAR): the Vulkan headers and loader (Debian libvulkan-dev) and glslc
# (Debian glslc). The library loads the loader at run time, so it is only checked for here.
function(tern_find_vulkan found_var)
  set(${found_var} FALSE PARENT_SCOPE)
  find_path(TERN_VULKAN_INC vulkan/vulkan.h)
  find_library(TERN_VULKAN_LOADER vulkan)
  find_program(TERN_GLSLC glslc)
  if(TERN_VULKAN_INC AND TERN_VULKAN_LOADER AND TERN_GLSLC)
    set(${found_var} TRUE PARENT_SCOPE)
  endif()
endfunction()

# tern_vulkan_shaders(OUT_CPP): one glslc run per line of backends/vulkan/shaders/variants.txt
# (NAME SOURCE BINDINGS NEEDS DEFINE...), then OUT_CPP embedding every SPIR-V binary.
function(tern_vulkan_shaders out_cpp)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR}/backends/vulkan/shaders)
  set(spv_dir ${TERN_GEN_DIR}/vulkan)
  file(MAKE_DIRECTORY ${spv_dir})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${dir}/variants.txt)
  file(GLOB includes ${dir}/*.glsl)
  file(STRINGS ${dir}/variants.txt lines)
  set(spvs "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^ *#" OR line MATCHES "^ *$")
      continue()
    endif()
    string(REGEX REPLACE " +" ";" f "${line}")
    list(GET f 0 name)
    list(GET f 1 src)
    list(LENGTH f n)
    set(defines "")
    if(n GREATER 4)
      list(SUBLIST f 4 -1 ds)
      foreach(d IN LISTS ds)
        list(APPEND defines -D${d})
      endforeach()
    endif()
    add_custom_command(OUTPUT ${spv_dir}/${name}.spv
      COMMAND ${TERN_GLSLC} -O --target-env=vulkan1.1 -fshader-stage=compute ${defines}
              -o ${spv_dir}/${name}.spv ${dir}/${src}
      DEPENDS ${dir}/${src} ${includes} ${dir}/variants.txt
      COMMENT "glslc: ${name}")
    list(APPEND spvs ${spv_dir}/${name}.spv)
  endforeach()
  add_custom_command(OUTPUT ${out_cpp}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out_cpp} -DVARIANTS=${dir}/variants.txt -DSPV_DIR=${spv_dir}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/TernEmbedSpirv.cmake
    DEPENDS ${spvs} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/TernEmbedSpirv.cmake
    COMMENT "embedding ${n} SPIR-V shaders")
endfunction()
