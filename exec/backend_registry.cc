#include "exec/backend_registry.h"

#include <map>
#include <utility>

namespace pipetwin::exec {
namespace {

std::map<std::string, BackendFactory>& Factories() {
  static std::map<std::string, BackendFactory> factories;
  return factories;
}

ReferenceFn& Reference() {
  static ReferenceFn fn;
  return fn;
}

}  // namespace

void RegisterBackend(const std::string& name, BackendFactory factory) {
  Factories()[name] = std::move(factory);
}

bool BackendRegistered(const std::string& name) { return Factories().count(name) > 0; }

std::vector<std::string> RegisteredBackends() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Factories()) names.push_back(name);
  return names;
}

Expected<std::unique_ptr<Backend>> MakeBackend(const std::string& name, const BackendConfig& cfg) {
  auto it = Factories().find(name);
  if (it == Factories().end()) {
    std::string known;
    for (const std::string& n : RegisteredBackends()) known += (known.empty() ? "" : ", ") + n;
    return Error::BadInput("--backend: unknown backend '" + name + "' (this program has: " +
                           (known.empty() ? std::string("none") : known) + ")");
  }
  return it->second(cfg);
}

void RegisterReference(ReferenceFn fn) { Reference() = std::move(fn); }

Expected<double> ReferenceError(const BackendConfig& cfg, const Backend& backend,
                                const std::vector<int>& stages, double measured_loss,
                                float perturb) {
  if (!Reference()) {
    return Error::Failure(
        "--check-reference needs the CPU backend's reference, which this program lacks");
  }
  return Reference()(cfg, backend, stages, measured_loss, perturb);
}

}  // namespace pipetwin::exec
