// register.h — adds the sleep backend ("sleep": every compute action sleeps for its time,
// communication is real MPI; exec/sleep/sleep_backend.h) to the executor's registry
// (exec/backend_registry.h). Call once from main() before RunJob or Calibrate.
#pragma once

namespace pipetwin::exec {

void RegisterSleepBackend();

}  // namespace pipetwin::exec
