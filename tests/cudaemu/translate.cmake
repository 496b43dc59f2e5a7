# Rewrites one engine/cuda/*.cu for the host C++ compiler of the CUDA
# emulator: `kernel<<<grid, block, shmem, stream>>>(args)` becomes
# `kernel | ::emu::cfg(__FILE__, __LINE__, grid, block, shmem, stream)(args)`,
# which emu_cuda.h turns into a launch on the CPU. Nothing else changes, and a
# #line directive keeps the original file and line numbers in diagnostics.
#   cmake -DIN=engine/cuda/x.cu -DOUT=build/x.cu.cc -P translate.cmake
file(READ "${IN}" text)
string(REPLACE "<<<" "| ::emu::cfg(__FILE__, __LINE__, " text "${text}")
string(REPLACE ">>>" ")" text "${text}")
file(WRITE "${OUT}" "#line 1 \"${IN}\"\n${text}")
