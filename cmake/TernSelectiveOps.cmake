# Selective-op builds (TERN_SELECTED_OPS / TERN_SELECTED_OPS_FROM): only the op sources and CPU
# kernel sources that register a selected op are called by the generated registration, so the
# linker's --gc-sections drops every other op's code (nothing else references it), and the
# registries keep only the selected op types.
#
# The op types a source registers are the op-type-like string literals ("Conv", "FusedConv") in
# the body of its register function (PREFIX<stem>); tests/unit/selective_ops_test.cpp checks
# that every op a register function adds is among them, so a source that builds names at run
# time is caught there.

# tern_registered_op_types(SRC PREFIX OUT): the op types SRC's PREFIX<stem>() registers.
function(tern_registered_op_types src prefix out)
  file(READ ${src} text)
  get_filename_component(stem ${src} NAME_WE)
  string(FIND "${text}" "void ${prefix}${stem}(" start)
  set(ops "")
  if(NOT start EQUAL -1)
    string(SUBSTRING "${text}" ${start} -1 body)
    string(FIND "${body}" "\n}" end)
    string(SUBSTRING "${body}" 0 ${end} body)
    string(REGEX MATCHALL "\"[A-Z][A-Za-z0-9]*\"" literals "${body}")
    foreach(lit IN LISTS literals)
      string(REPLACE "\"" "" op "${lit}")
      list(APPEND ops ${op})
    endforeach()
    list(REMOVE_DUPLICATES ops)
  endif()
  set(${out} "${ops}" PARENT_SCOPE)
endfunction()

# tern_select_sources(SELECTED PREFIX OUT_SOURCES OUT_ALL_OPS SOURCES...): the sources whose
# register function adds one of SELECTED, and every op type the sources register.
function(tern_select_sources selected prefix out_sources out_all)
  set(kept "")
  set(all "")
  foreach(src IN LISTS ARGN)
    tern_registered_op_types(${src} ${prefix} ops)
    list(APPEND all ${ops})
    foreach(op IN LISTS ops)
      if(op IN_LIST selected)
        list(APPEND kept ${src})
        break()
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES all)
  set(${out_sources} "${kept}" PARENT_SCOPE)
  set(${out_all} "${all}" PARENT_SCOPE)
endfunction()

# tern_resolve_selected_ops(OUT OPS MODELS): OPS plus the ops scripts/selected_ops.py finds in
# MODELS (with the ops the optimizer makes of them), sorted; empty when both are (every op).
function(tern_resolve_selected_ops out ops models)
  if(NOT models STREQUAL "")
    # Through its #! line: Debian's python3, the one with python3-onnx.
    execute_process(
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/scripts/selected_ops.py --cmake ${models}
      OUTPUT_VARIABLE from ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "scripts/selected_ops.py ${models} failed: ${err}")
    endif()
    list(APPEND ops ${from})
    # Reconfigure when a model changes.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${models})
  endif()
  list(REMOVE_DUPLICATES ops)
  list(SORT ops)
  set(${out} "${ops}" PARENT_SCOPE)
endfunction()

# The element types a minimal build has kernels for unless TERN_SELECTED_DTYPES (or a selective
# build's models) says otherwise: those TensorFlow Lite's kernels cover (README, mobile).
set(TERN_MINIMAL_DTYPES float32 float16 int8 uint8 int16 int32 int64 bool)

# tern_resolve_selected_dtypes(OUT DTYPES MODELS): DTYPES plus the element types
# scripts/selected_ops.py --dtypes finds in MODELS; empty for every type: DTYPES `all`, or both
# empty, or a .tern model, whose intermediate types only the planner knows. In a minimal build
# every type is TERN_MINIMAL_DTYPES unless DTYPES is `all`.
function(tern_resolve_selected_dtypes out dtypes models)
  if(dtypes STREQUAL "all")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  set(from "")
  if(NOT models STREQUAL "")
    execute_process(
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/scripts/selected_ops.py --cmake --dtypes ${models}
      OUTPUT_VARIABLE from ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "scripts/selected_ops.py --dtypes ${models} failed: ${err}")
    endif()
  endif()
  if(from STREQUAL "all" AND NOT dtypes)
    set(dtypes "")
  else()
    list(REMOVE_ITEM from all)
    list(APPEND dtypes ${from})
  endif()
  if(NOT dtypes AND TERN_MINIMAL)
    set(dtypes ${TERN_MINIMAL_DTYPES})
  endif()
  if(dtypes)
    list(APPEND dtypes float32 int64)  # (half kernels widen to float32; shapes are int64)
  endif()
  list(REMOVE_DUPLICATES dtypes)
  list(SORT dtypes)
  set(${out} "${dtypes}" PARENT_SCOPE)
endfunction()

# tern_dtype_mask(OUT DTYPES): the C++ expression of kBuiltDTypes (core/dtype.h) for DTYPES
# (every type when empty): bit N for the dtype numbered N.
function(tern_dtype_mask out)
  set(numbers float32=1 uint8=2 int8=3 uint16=4 int16=5 int32=6 int64=7 string=8 bool=9
    float16=10 float64=11 uint32=12 uint64=13 bfloat16=16)
  if(NOT ARGN)
    set(${out} "~uint64_t{0}" PARENT_SCOPE)
    return()
  endif()
  set(mask 0)
  foreach(dt IN LISTS ARGN)
    set(n "")
    foreach(pair IN LISTS numbers)
      if(pair MATCHES "^${dt}=([0-9]+)$")
        set(n ${CMAKE_MATCH_1})
      endif()
    endforeach()
    if(n STREQUAL "")
      message(FATAL_ERROR "Selective build: no dtype '${dt}' (float32, int64, ...; core/dtype.h)")
    endif()
    math(EXPR mask "${mask} | (1 << ${n})" OUTPUT_FORMAT HEXADECIMAL)
  endforeach()
  set(${out} "uint64_t{${mask}}" PARENT_SCOPE)
endfunction()

# tern_optimizer_ops_mask(OUT OPS): the C++ expression of kBuiltOptimizerOps (core/opt/graph_util.h)
# for the selection OPS (every op when empty): bit N for the op named by OptOp's Nth enumerator.
function(tern_optimizer_ops_mask out ops)
  if(NOT ops)
    set(${out} "~uint64_t{0}" PARENT_SCOPE)
    return()
  endif()
  set(header ${CMAKE_CURRENT_SOURCE_DIR}/core/opt/graph_util.h)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${header})
  file(READ ${header} text)
  string(REGEX MATCH "enum class OptOp : uint32_t {[^}]*}" block "${text}")
  string(REGEX MATCHALL "k[A-Z][A-Za-z0-9]*" names "${block}")
  if(NOT names)
    message(FATAL_ERROR "cmake/TernSelectiveOps.cmake: no OptOp list in ${header}")
  endif()
  set(mask 0)
  set(n 0)
  foreach(name IN LISTS names)
    string(SUBSTRING "${name}" 1 -1 op)
    if(op IN_LIST ops)
      math(EXPR mask "${mask} | (1 << ${n})" OUTPUT_FORMAT HEXADECIMAL)
    endif()
    math(EXPR n "${n} + 1")
  endforeach()
  set(${out} "uint64_t{${mask}}" PARENT_SCOPE)
endfunction()

# tern_generate_registrations(DIR OPS OUT_TEXT [DTYPES...]): DIR/register_ops.cpp and
# DIR/register_cpu_kernels.cpp, calling every op and CPU kernel source's register function, or
# for a selection (OPS) those registering a selected op, then the registries' selection. OUT_TEXT:
# "selected ops=N" for a selection, else empty. Reads TERN_OP_SOURCES, TERN_CPU_KERNEL_SOURCES.
function(tern_generate_registrations dir ops out_text)
  # The element types kernels are instantiated for (core/dtype.h, dtype_built).
  tern_dtype_mask(mask ${ARGN})
  # (What a left-out type's refusal calls this build: core/built_dtypes.h.)
  if(ops)
    set(kind selective)
  elseif(TERN_MINIMAL)
    set(kind minimal)
  else()
    set(kind full)  # (every type: nothing is refused)
  endif()
  tern_optimizer_ops_mask(opt_mask "${ops}")
  set(define "extern const uint64_t kBuiltDTypes = ${mask};\nextern const char kBuiltDTypesBuild[] = \"${kind}\";\nextern const uint64_t kBuiltOptimizerOps = ${opt_mask};")
  if(NOT ops)
    tern_generate_registration(${dir}/register_ops.cpp "core/op_registry.h"
      register_all_ops OpRegistry register_op_ ${TERN_OP_SOURCES} DEFINE "${define}")
    tern_generate_registration(${dir}/register_cpu_kernels.cpp "core/kernel_registry.h"
      register_cpu_kernels KernelRegistry register_cpu_ ${TERN_CPU_KERNEL_SOURCES})
    set(${out_text} "" PARENT_SCOPE)
    return()
  endif()
  tern_select_sources("${ops}" register_op_ op_sources all_ops ${TERN_OP_SOURCES})
  tern_select_sources("${ops}" register_cpu_ kernel_sources kernel_ops ${TERN_CPU_KERNEL_SOURCES})
  set(unknown ${ops})
  list(REMOVE_ITEM unknown ${all_ops})
  if(unknown)
    message(FATAL_ERROR "Selective build: Tern has no op ${unknown}")
  endif()
  set(left_out ${all_ops})
  list(REMOVE_ITEM left_out ${ops})
  list(SORT left_out)
  tern_cxx_name_list(selected_text ${ops})
  tern_cxx_name_list(left_out_text ${left_out})
  tern_generate_registration(${dir}/register_ops.cpp "core/op_registry.h"
    register_all_ops OpRegistry register_op_ ${op_sources}
    EPILOGUE "r.select_packed(${selected_text}, ${left_out_text})" DEFINE "${define}")
  tern_generate_registration(${dir}/register_cpu_kernels.cpp "core/kernel_registry.h"
    register_cpu_kernels KernelRegistry register_cpu_ ${kernel_sources}
    EPILOGUE "r.keep_ops_packed(\"cpu\", ${selected_text})")
  list(LENGTH ops count)
  string(JOIN ";" joined ${ops})
  string(JOIN ";" dtypes_joined ${ARGN})
  if(ARGN)
    set(dtypes_text " (dtypes ${dtypes_joined})")
  else()
    set(dtypes_text "")
  endif()
  message(STATUS "Selective build (${dir}): ${count} ops (${joined})${dtypes_text}")
  list(LENGTH ARGN dtype_count)
  if(ARGN)
    set(${out_text} "selected ops=${count}, selected dtypes=${dtype_count}" PARENT_SCOPE)
  else()
    set(${out_text} "selected ops=${count}" PARENT_SCOPE)
  endif()
endfunction()

# tern_cxx_string_list(OUT ITEMS...): `"a", "b"` for a braced C++ initializer.
function(tern_cxx_string_list out)
  set(text "")
  foreach(item IN LISTS ARGN)
    string(APPEND text "\"${item}\", ")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# tern_cxx_name_list(OUT NAMES...): the names as one C++ string of NUL-ended names (split_names in
# core/op_registry.h): "Conv\0" "Relu\0" (the literal's own NUL ends the list).
function(tern_cxx_name_list out)
  set(text "\"\"")
  foreach(item IN LISTS ARGN)
    string(APPEND text " \"${item}\\0\"")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# tern_generate_source_table(OUT REGISTRY PREFIX SOURCES...): for the selective-ops test, a table
# of every source's register function and the op types CMake reads from it.
function(tern_generate_source_table out registry prefix)
  set(decls "")
  set(rows "")
  foreach(src IN LISTS ARGN)
    get_filename_component(stem ${src} NAME_WE)
    tern_registered_op_types(${src} ${prefix} ops)
    tern_cxx_string_list(names ${ops})
    string(APPEND decls "void ${prefix}${stem}(${registry}& r);\n")
    string(APPEND rows "    {\"${stem}\", ${prefix}${stem}, {${names}}},\n")
  endforeach()
  set(text "// Generated by CMake (cmake/TernSelectiveOps.cmake); do not edit.\n#pragma once\n\n#include <string>\n#include <vector>\n\nnamespace tern {\n${decls}}  // namespace tern\n\nnamespace tern::generated {\ninline const std::vector<SourceOps<${registry}>>& ${prefix}sources() {\n  static const std::vector<SourceOps<${registry}>> table = {\n${rows}  };\n  return table;\n}\n}  // namespace tern::generated\n")
  tern_write_if_changed(${out} "${text}")
endfunction()
