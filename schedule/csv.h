// csv.h — schedule CSV files: one row per rank, one action per cell (DESIGN.md).
//
// Formats, as `pipetwin schedule --format` names them:
//   - compute_only: F, B, I, W (torch's compute_only; optionally step-aligned with idle cells
//     for PipelineScheduleMulti, WriteStepAlignedCsv);
//   - compute_comms: what torch 2.15's _PipelineScheduleRuntime runs (ForTorchRuntime in
//     lower.h): receives in send order, WAIT_SEND_*, REDUCE_GRAD + WAIT_REDUCE_GRAD, no OPT;
//   - pipetwin: every action of pipetwin's IR as lowered (OPT too); loads back unchanged.
// Reading takes every kind torch 2.15 writes, with its meaning: `(0F3;3B1)OVERLAP_F_B` is
// its sub-actions one after the other (as torch's runtime runs them), an empty cell is an idle
// step (dropped), UNSHARD/RESHARD/WAIT_* are kept as actions.
//
//   std::string text = WriteScheduleCsv(s, CsvFormat::kPipetwin);
//   Expected<Schedule> back = ParseScheduleCsv(text, "out.csv");
#pragma once

#include <string>

#include "schedule/file_io.h"  // WriteFileAtomic, for the callers that write CSVs
#include "schedule/schedule.h"

namespace pipetwin {

enum class CsvFormat { kComputeOnly, kComputeComms, kPipetwin };

// The programs `format` writes for the lowered schedule `s`.
Schedule ScheduleForCsv(const Schedule& s, CsvFormat format);
std::string WriteScheduleCsv(const Schedule& s, CsvFormat format);
// compute_only rows aligned to unit steps (StepAligned in lower.h), idle steps empty.
std::string WriteStepAlignedCsv(const Schedule& s);
// Placement follows from which row each stage appears in: a stage on two rows is an error.
Expected<Schedule> ParseScheduleCsv(const std::string& text, const std::string& path);
Expected<Schedule> LoadScheduleCsv(const std::string& path);

}  // namespace pipetwin
