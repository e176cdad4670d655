# tern_find_image_codecs(MODE): the libraries ImageDecoder decodes with, one per format, each
# optional: libjpeg (Debian libjpeg-dev), libpng (libpng-dev), libtiff (libtiff-dev), libwebp
# (libwebp-dev) and OpenJPEG (libopenjp2-7-dev). MODE AUTO takes those found; ON requires all.
# Sets in the caller:
#   TERN_IMAGE_CODECS         the formats found ("jpeg;png;...")
#   TERN_IMAGE_CODEC_DEFS     TERN_HAVE_<FORMAT>=1 for each, for the decoders and their tests
#   TERN_IMAGE_CODEC_OPTIONS  -isystem flags for headers outside the compiler's own directories
#   TERN_IMAGE_CODEC_LIBS     the library files to link (absolute paths)
# A format whose library is missing still builds: its decoder answers UNSUPPORTED at run time.
# One codec's result: FOUND true adds it (NAME, TERN_HAVE_<DEF>, its include dirs and libraries);
# false adds WHAT to the missing list.
macro(_tern_image_codec found name def incs libs what)
  if(${found})
    list(APPEND codecs ${name})
    list(APPEND defs TERN_HAVE_${def}=1)
    list(APPEND incs_all ${${incs}})
    list(APPEND libs_all ${${libs}})
  else()
    list(APPEND missing "${what}")
  endif()
endmacro()

function(tern_find_image_codecs mode)
  set(codecs "")
  set(defs "")
  set(incs_all "")
  set(libs_all "")
  set(missing "")
  find_package(JPEG QUIET)
  find_package(PNG QUIET)
  # libtiff by its header and library (Debian keeps tiffio.h in the multiarch include directory,
  # one the compiler searches anyway).
  find_path(TERN_TIFF_INC tiffio.h)
  find_library(TERN_TIFF_LIB tiff)
  set(tern_tiff_found FALSE)
  if(TERN_TIFF_INC AND TERN_TIFF_LIB)
    set(tern_tiff_found TRUE)
  endif()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(TERN_WEBP QUIET libwebp)
    pkg_check_modules(TERN_OPENJP2 QUIET libopenjp2)
  endif()
  _tern_image_codec(JPEG_FOUND jpeg JPEG JPEG_INCLUDE_DIRS JPEG_LIBRARIES "libjpeg (libjpeg-dev)")
  _tern_image_codec(PNG_FOUND png PNG PNG_INCLUDE_DIRS PNG_LIBRARIES "libpng (libpng-dev)")
  if(PNG_FOUND)
    list(APPEND defs ${PNG_DEFINITIONS})
  endif()
  _tern_image_codec(tern_tiff_found tiff TIFF TERN_TIFF_INC TERN_TIFF_LIB "libtiff (libtiff-dev)")
  _tern_image_codec(TERN_WEBP_FOUND webp WEBP TERN_WEBP_INCLUDE_DIRS TERN_WEBP_LINK_LIBRARIES
    "libwebp (libwebp-dev)")
  _tern_image_codec(TERN_OPENJP2_FOUND openjpeg OPENJPEG TERN_OPENJP2_INCLUDE_DIRS
    TERN_OPENJP2_LINK_LIBRARIES "OpenJPEG (libopenjp2-7-dev)")

  if(missing)
    string(JOIN ", " missing_text ${missing})
    if(mode STREQUAL "ON")
      message(FATAL_ERROR "TERN_WITH_IMAGE_CODECS=ON but ${missing_text} not found; run scripts/setup.sh")
    endif()
    message(STATUS "ImageDecoder: ${missing_text} not found; those formats answer UNSUPPORTED "
                   "(run scripts/setup.sh to install them)")
  endif()
  # -isystem for the headers outside the compiler's own directories (OpenJPEG's versioned one);
  # /usr/include itself must not be one, or the C++ headers' #include_next breaks.
  set(options "")
  list(REMOVE_DUPLICATES incs_all)
  foreach(dir IN LISTS incs_all)
    if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      list(APPEND options -isystem ${dir})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES libs_all)
  set(TERN_IMAGE_CODECS "${codecs}" PARENT_SCOPE)
  set(TERN_IMAGE_CODEC_DEFS "${defs}" PARENT_SCOPE)
  set(TERN_IMAGE_CODEC_OPTIONS "${options}" PARENT_SCOPE)
  set(TERN_IMAGE_CODEC_LIBS "${libs_all}" PARENT_SCOPE)
endfunction()
