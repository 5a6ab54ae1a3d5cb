# Warning flags shared by the library, tests, benchmarks and examples.
function(rk_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wstrict-prototypes
      -Wmissing-prototypes -Wpointer-arith -Wvla -Wconversion -Wno-sign-conversion>
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  if(RK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
