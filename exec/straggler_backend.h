// straggler_backend.h — execution.stragglers (models/stragglers.h) on a backend that computes
// (cpu): a wrapper that, after each compute action of a step whose factor for this world rank
// is f > 1, sleeps (f - 1) times the time the action took, so the rank runs f times slower.
// The sleep backend scales its own sleeps and is not wrapped.
//
//   std::unique_ptr<Backend> b = WrapStragglers(std::move(cpu), job.config.stragglers, rank);
#pragma once

#include <memory>

#include "exec/backend.h"
#include "models/stragglers.h"

namespace pipetwin::exec {

std::unique_ptr<Backend> WrapStragglers(std::unique_ptr<Backend> inner,
                                        const models::Stragglers& stragglers, int world_rank);

}  // namespace pipetwin::exec
