// csv.h — schedule CSV files: one row per rank, one action per cell (DESIGN.md).
//
// `compute_only` keeps F, B, I, W; `compute_comms` keeps every action (SEND/RECV,
// REDUCE_GRAD, OPT too). An empty cell is an idle step; reading drops it. A file written by
// WriteScheduleCsv loads back unchanged.
//
//   std::string text = WriteScheduleCsv(s, CsvFormat::kComputeComms);
//   Expected<Schedule> back = ParseScheduleCsv(text, "out.csv");
#pragma once

#include <string>

#include "schedule/file_io.h"  // WriteFileAtomic, for the callers that write CSVs
#include "schedule/schedule.h"

namespace pipetwin {

enum class CsvFormat { kComputeOnly, kComputeComms };

// Whether `format` writes the action (compute_only drops communication and OPT).
bool KeptIn(CsvFormat format, const Action& a);
std::string WriteScheduleCsv(const Schedule& s, CsvFormat format);
// Placement follows from which row each stage appears in: a stage on two rows is an error.
Expected<Schedule> ParseScheduleCsv(const std::string& text, const std::string& path);
Expected<Schedule> LoadScheduleCsv(const std::string& path);

}  // namespace pipetwin
