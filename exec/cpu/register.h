// register.h — adds the CPU backend ("cpu": Eigen + MPI, exec/cpu/cpu_backend.h) and the
// single-process reference behind `run --check-reference` to the executor's registry
// (exec/backend_registry.h). Call once from main() before RunJob or Calibrate.
#pragma once

namespace pipetwin::cpu {

void RegisterCpuBackend();

}  // namespace pipetwin::cpu
