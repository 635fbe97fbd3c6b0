#include "exec/sleep/register.h"

#include "exec/backend_registry.h"
#include "exec/sleep/sleep_backend.h"

namespace pipetwin::exec {

void RegisterSleepBackend() { RegisterBackend("sleep", SleepBackend::Make); }

}  // namespace pipetwin::exec
