// backend_registry.h — the executor's backends by name. The engine, RunJob and Calibrate know
// only this and exec/backend.h; each backend registers itself from its own folder (exec/cpu/,
// exec/cuda/) and the program's main() calls those registration functions.
//
//   cpu::RegisterCpuBackend();                         // in main(), before RunJob
//   Expected<std::unique_ptr<Backend>> b = MakeBackend("cpu", cfg);
//
// Registration is an explicit call rather than a static initialiser: a registrar object in a
// static library is dropped by the linker unless something references its object file (or the
// library is linked with --whole-archive, which every consumer must then remember), and
// static initialisation order across translation units is unspecified. A call from main() is
// visible, cannot be lost at link time, and fails to link if the backend library is missing.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "schedule/expected.h"

namespace pipetwin::exec {

using BackendFactory = std::function<Expected<std::unique_ptr<Backend>>(const BackendConfig&)>;

// The worst relative error (‖a − b‖ / ‖b‖ per tensor) of `backend`'s gradients of `stages`,
// and of the step's mean loss, against a single-process reference of the same model and data;
// `perturb` scales the backend's gradients first (a test hook).
using ReferenceFn =
    std::function<double(const BackendConfig& cfg, const Backend& backend,
                         const std::vector<int>& stages, double measured_loss, float perturb)>;

// Adds (or replaces) the backend `name`. Not thread-safe: register before running anything.
void RegisterBackend(const std::string& name, BackendFactory factory);
bool BackendRegistered(const std::string& name);
// Registered names, sorted.
std::vector<std::string> RegisteredBackends();
// Builds backend `name`; an unknown name is bad input whose message lists the registered ones.
Expected<std::unique_ptr<Backend>> MakeBackend(const std::string& name, const BackendConfig& cfg);

// The reference computation behind `run --check-reference` (the CPU backend registers it).
void RegisterReference(ReferenceFn fn);
Expected<double> ReferenceError(const BackendConfig& cfg, const Backend& backend,
                                const std::vector<int>& stages, double measured_loss,
                                float perturb);

}  // namespace pipetwin::exec
