# cmake -DIN=pr_dev.h -DOUT=file.c -DNAME=symbol -P embed.cmake
# Writes IN's bytes as a NUL-terminated string NAME (const char *const), so
# the command carries its device kernel's source (docs/cuda.md: the cuda
# backend compiles a kernel's device_source text with NVRTC at launch).
file(READ ${IN} _hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
get_filename_component(_name ${IN} NAME)
file(WRITE ${OUT} "/* Generated from ${_name} by embed.cmake: do not edit. */\n"
  "static const unsigned char text[] = {${_bytes}0};\n"
  "extern const char *const ${NAME};\n"
  "const char *const ${NAME} = (const char *)text;\n")
