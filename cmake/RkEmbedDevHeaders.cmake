# Embeds the device-side headers NVRTC needs (ringkernel/dev_kernel.h and
# what it includes) into the library, so a run-time compile needs no
# include directory: src/backend/cuda/nvrtc.c hands them to
# nvrtcCreateProgram as named headers. Regenerated when a header changes.
set(RK_DEV_HEADERS dev_kernel.h dev_send.h dev_oneshot.h dev_warp.h dev_numba.h dev_ctl.h dev_ll.h
  dev_k2k.h ctl_proto.h ring_proto.h ring_ll.h rk_dev.h rk_atomic.h error.h)
set(RK_DEV_HEADERS_C ${CMAKE_CURRENT_BINARY_DIR}/rk_dev_headers.c)
set(_deps)
foreach(h ${RK_DEV_HEADERS})
  list(APPEND _deps ${CMAKE_CURRENT_SOURCE_DIR}/include/ringkernel/${h})
endforeach()
string(REPLACE ";" "," _list "${RK_DEV_HEADERS}")
add_custom_command(OUTPUT ${RK_DEV_HEADERS_C}
  COMMAND ${CMAKE_COMMAND} -DOUT=${RK_DEV_HEADERS_C}
    -DDIR=${CMAKE_CURRENT_SOURCE_DIR}/include/ringkernel
    -DHEADERS=${_list}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/RkEmbedDevHeadersGen.cmake
  DEPENDS ${_deps} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/RkEmbedDevHeadersGen.cmake
  COMMENT "Embedding the device headers for NVRTC" VERBATIM)
list(APPEND RK_SOURCES ${RK_DEV_HEADERS_C})
