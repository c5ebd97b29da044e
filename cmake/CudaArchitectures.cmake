# `native` when a GPU is visible, else sm_90a (Hopper). CMAKE_CUDA_ARCHITECTURES overrides both.
# A visible compute-capability 9.0 GPU gets 90a rather than plain 90, so Hopper-only
# instructions (wgmma, setmaxnreg) are available to the kernels that use them.
function(tessel_choose_cuda_architectures)
  # A value this function chose on an earlier configure is not a user choice: detect again.
  if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL ""
     AND NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${TESSEL_AUTO_CUDA_ARCHITECTURES}")
    message(STATUS "tessel: CUDA architectures (user): ${CMAKE_CUDA_ARCHITECTURES}")
    return()
  endif()
  set(arch 90a)
  set(reason "no GPU visible")
  find_program(NVIDIA_SMI nvidia-smi)
  if(NVIDIA_SMI)
    execute_process(COMMAND ${NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND NOT "${caps}" STREQUAL "")
      string(REGEX MATCH "^[0-9]+\\.[0-9]+" cap "${caps}")
      if(cap STREQUAL "9.0")
        set(arch 90a)
      else()
        set(arch native)
      endif()
      set(reason "GPU visible, compute capability ${cap}")
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES ${arch} CACHE STRING "CUDA architectures" FORCE)
  set(TESSEL_AUTO_CUDA_ARCHITECTURES ${arch} CACHE INTERNAL "architectures chosen automatically")
  message(STATUS "tessel: CUDA architectures ${arch} (${reason})")
endfunction()
