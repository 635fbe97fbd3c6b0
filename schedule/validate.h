// validate.h — check a schedule before anything runs it.
//
// ValidateSchedule checks, in order: every action names a stage that lives on its rank and a
// microbatch in range; counts (each stage runs F once per microbatch, and either B once or I
// and W once; with communication, every cross-rank edge has exactly one SEND and one RECV);
// order on each rank (F before I or B of the same stage and microbatch, I before W, RECV
// before its consumer, SEND after its producer, REDUCE_GRAD and OPT after the last gradient);
// and a dry run over all ranks that finds deadlocks (sends never block; a receive waits for
// its send). Errors print the rank × step grid with the failing steps marked >like this<.
//
//   if (Status st = ValidateSchedule(s, "my.csv"); !st) std::cerr << st.error().message;
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.h"

namespace pipetwin {

Status ValidateSchedule(const Schedule& s, const std::string& source);

// The rank × step grid, with the given (rank, step) cells marked. Long programs are cut to a
// window around the marks.
std::string FormatGrid(const Schedule& s, const std::vector<std::pair<int, int>>& marks);

}  // namespace pipetwin
