// ascii.h — a rank × time picture of a timeline, as the pipeline papers draw them.
//
// Time is cut into equal slots (the greatest common divisor of the compute costs, widened
// so the picture stays under `max_columns`); each compute action fills its slots with its
// label ("F3", "I3", "W3"; with several chunks per rank the stage is shown: "5F3"), and an
// idle slot is ".".
#pragma once

#include <string>

#include "schedule/timeline.h"

namespace pipetwin {

std::string AsciiTimeline(const Timeline& t, int stages_per_rank, int max_columns = 200);

}  // namespace pipetwin
