# The CUDA architectures to compile for.
#
# - A source build: `native` when a GPU is visible, else sm_90a (Hopper). A visible compute-capability
#   9.0 GPU gets 90a rather than plain 90, so Hopper-only instructions (wgmma, setmaxnreg) are
#   available to the kernels that use them.
# - A wheel (TESSEL_WHEEL=ON, `make wheel`): every architecture CUDA 13 supports on x86-64 servers and
#   workstations, Turing to Blackwell, as SASS, plus PTX of the newest so that a GPU newer than the
#   wheel JIT-compiles it: TESSEL_WHEEL_CUDA_ARCHS_DEFAULT. CUDA 13 dropped Maxwell, Pascal and Volta
#   (sm_50..sm_72: `nvcc --list-gpu-arch` starts at compute_75). A SASS image runs on its own major
#   version at the same or a higher minor one, so 80 also covers 8.7, 86 covers 8.7/8.8, 100 covers
#   10.3 and 120 covers 12.1; 90a (not 90) keeps tessel's Hopper GEMM, which needs wgmma. sm_110
#   (Jetson Thor) and sm_87/88 (Orin) are aarch64 boards, outside an x86-64 wheel.
#   TESSEL_WHEEL_CUDA_ARCHS (a CMake variable or the environment variable of that name) overrides the
#   list, for a quick one-architecture test wheel: TESSEL_WHEEL_CUDA_ARCHS=90a-real.
# CMAKE_CUDA_ARCHITECTURES, given by the user, overrides all of these.
set(TESSEL_WHEEL_CUDA_ARCHS_DEFAULT "75-real;80-real;86-real;89-real;90a-real;100-real;120-real;120-virtual")

function(tessel_choose_cuda_architectures)
  # A value this function chose on an earlier configure is not a user choice: detect again.
  if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL ""
     AND NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${TESSEL_AUTO_CUDA_ARCHITECTURES}")
    message(STATUS "tessel: CUDA architectures (user): ${CMAKE_CUDA_ARCHITECTURES}")
    return()
  endif()
  if(TESSEL_WHEEL)
    if(DEFINED TESSEL_WHEEL_CUDA_ARCHS AND NOT "${TESSEL_WHEEL_CUDA_ARCHS}" STREQUAL "")
      set(arch "${TESSEL_WHEEL_CUDA_ARCHS}")
      set(reason "wheel, TESSEL_WHEEL_CUDA_ARCHS")
    elseif(NOT "$ENV{TESSEL_WHEEL_CUDA_ARCHS}" STREQUAL "")
      set(arch "$ENV{TESSEL_WHEEL_CUDA_ARCHS}")
      set(reason "wheel, TESSEL_WHEEL_CUDA_ARCHS from the environment")
    else()
      set(arch "${TESSEL_WHEEL_CUDA_ARCHS_DEFAULT}")
      set(reason "wheel: Turing to Blackwell, PTX of the newest")
    endif()
    string(REPLACE "," ";" arch "${arch}")
  else()
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
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${arch}" CACHE STRING "CUDA architectures" FORCE)
  set(TESSEL_AUTO_CUDA_ARCHITECTURES "${arch}" CACHE INTERNAL "architectures chosen automatically")
  message(STATUS "tessel: CUDA architectures ${arch} (${reason})")
endfunction()
