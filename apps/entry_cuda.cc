// entry_cuda.cc — main() of `pipetwin-cuda`: the same command line as `pipetwin` with the CUDA
// backend registered next to the CPU one (which also gives --check-reference its reference).
// Built only with PIPETWIN_WITH_CUDA; `pipetwin` starts it for `--backend cuda`.
#include "apps/commands.h"
#include "exec/cpu/register.h"
#include "exec/cuda/factory.h"
#include "exec/sleep/register.h"

int main(int argc, char** argv) {
  pipetwin::cpu::RegisterCpuBackend();
  pipetwin::exec::RegisterCudaBackend();
  pipetwin::exec::RegisterSleepBackend();
  return pipetwin::RunMain(argc, argv);
}
