// entry_cpu.cc — main() of `pipetwin`: the command line with the CPU backend only, so that
// every subcommand starts without loading CUDA's libraries; `run` and `calibrate` with
// `--backend cuda` hand over to `pipetwin-cuda` (HandOverBackend in commands.h).
#include "apps/commands.h"
#include "exec/cpu/register.h"

int main(int argc, char** argv) {
  pipetwin::cpu::RegisterCpuBackend();
  return pipetwin::RunMain(argc, argv);
}
