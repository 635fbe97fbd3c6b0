// entry_cpu.cc — main() of `pipetwin`: the command line with the CPU and sleep backends only,
// so that every subcommand starts without loading CUDA's libraries; `run` and `calibrate` with
// `--backend cuda` hand over to `pipetwin-cuda` (HandOverBackend in commands.h).
#include "apps/commands.h"
#include "exec/cpu/register.h"
#include "exec/sleep/register.h"

int main(int argc, char** argv) {
  pipetwin::cpu::RegisterCpuBackend();
  pipetwin::exec::RegisterSleepBackend();
  return pipetwin::RunMain(argc, argv);
}
