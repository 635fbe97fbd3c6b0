#include "schedule/csv.h"

#include "schedule/file_io.h"
#include "schedule/limits.h"
#include "schedule/lower.h"
#include "schedule/quote.h"

#include <algorithm>
#include <sstream>

namespace pipetwin {

Schedule ScheduleForCsv(const Schedule& s, CsvFormat format) {
  switch (format) {
    case CsvFormat::kComputeOnly:
      return ComputeOnly(s);
    case CsvFormat::kComputeComms:
      return ForTorchRuntime(s.HasComms() ? s
                                          : Lower(s, {.reduce_grad = true, .optimizer = false}));
    case CsvFormat::kPipetwin:
      break;
  }
  return s;
}

std::string WriteScheduleCsv(const Schedule& s, CsvFormat format) {
  const Schedule w = ScheduleForCsv(s, format);
  std::string out;
  for (const auto& prog : w.programs) {
    bool first = true;
    for (const Action& a : prog) {
      if (!first) out += ',';
      out += a.ToString();
      first = false;
    }
    out += '\n';
  }
  return out;
}

std::string WriteStepAlignedCsv(const Schedule& s) {
  std::string out;
  for (const auto& row : StepAligned(ComputeOnly(s))) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out += ',';
      if (row[i]) out += row[i]->ToString();
    }
    out += '\n';
  }
  return out;
}

namespace {

// One cell: an action, or torch's overlapped pair "(0F3;3B1)OVERLAP_F_B", which torch's
// runtime runs as its sub-actions one after the other (so they are read as two actions).
Expected<std::vector<Action>> ParseCell(const std::string& cell) {
  if (cell.front() != '(') {
    auto a = Action::Parse(cell);
    if (!a) return a.error();
    return std::vector<Action>{*a};
  }
  const std::size_t close = cell.find(')');
  const std::string kind = close == std::string::npos ? "" : cell.substr(close + 1);
  if (close == std::string::npos || kind != "OVERLAP_F_B") {
    return Error::BadInput("bad action " + Quoted(cell) +
                           ": a parenthesised cell must be (A;B)OVERLAP_F_B with A and B "
                           "compute actions (F, B, I or W)");
  }
  std::vector<Action> out;
  std::size_t from = 1;
  while (from <= close) {
    std::size_t semi = cell.find(';', from);
    if (semi == std::string::npos || semi > close) semi = close;
    std::string sub = cell.substr(from, semi - from);
    sub.erase(0, sub.find_first_not_of(" \t"));
    sub.erase(sub.find_last_not_of(" \t") + 1);
    auto a = Action::Parse(sub);
    if (!a) return Error::BadInput("in " + Quoted(cell) + ": " + a.error().message);
    if (!IsCompute(a->kind) || a->kind == ActionKind::kOptimizer) {
      return Error::BadInput("in " + Quoted(cell) + ": " + a->ToString() +
                             " cannot be overlapped (only F, B, I and W)");
    }
    out.push_back(*a);
    from = semi + 1;
  }
  if (out.size() < 2) {
    return Error::BadInput("bad action " + Quoted(cell) + ": OVERLAP_F_B needs two actions");
  }
  return out;
}

}  // namespace

Expected<Schedule> ParseScheduleCsv(const std::string& text, const std::string& path) {
  Schedule s;
  std::istringstream in(text);
  std::string line;
  int row = 0;
  int max_stage = -1;
  int max_mb = -1;
  std::vector<int> owner;  // stage -> rank, -1 unknown
  // Checks one action of row `row`, column `col` and appends it to the rank's program.
  const auto add = [&](const Action& a, int row_, std::size_t col_,
                       std::vector<Action>& prog) -> Status {
    const int rank = row_ - 1;
    const std::string where =
        path + ": row " + std::to_string(row_) + ", column " + std::to_string(col_) + ": ";
    if (a.stage > kMaxCsvStage) {
      return Error::BadInput(where + "stage " + std::to_string(a.stage) +
                             " is out of range (at most " + std::to_string(kMaxCsvStage) + ")");
    }
    if (a.microbatch > kMaxCsvMicrobatch) {
      return Error::BadInput(where + "microbatch " + std::to_string(a.microbatch) +
                             " is out of range (at most " + std::to_string(kMaxCsvMicrobatch) +
                             ")");
    }
    const std::int64_t stages = std::max(max_stage, a.stage) + 1;
    const std::int64_t mbs = std::max(max_mb, a.microbatch) + 1;
    if (stages * mbs * 4 > kMaxScheduleActions) {
      return Error::BadInput(where + std::to_string(stages) + " stages x " + std::to_string(mbs) +
                             " microbatches x 4 exceeds the limit of " +
                             std::to_string(kMaxScheduleActions) + " schedule actions");
    }
    if (static_cast<std::size_t>(a.stage) >= owner.size()) {
      owner.resize(static_cast<std::size_t>(a.stage) + 1, -1);
    }
    int& o = owner[static_cast<std::size_t>(a.stage)];
    if (o != -1 && o != rank) {
      return Error::BadInput(where + "stage " + std::to_string(a.stage) + " appears on rank " +
                             std::to_string(o) + " and on rank " + std::to_string(rank) +
                             " (a stage lives on exactly one rank)");
    }
    o = rank;
    max_stage = std::max(max_stage, a.stage);
    max_mb = std::max(max_mb, a.microbatch);
    prog.push_back(a);
    return OkStatus();
  };
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (row > kMaxCsvRanks && line.find_first_not_of(", \t") != std::string::npos) {
      return Error::BadInput(path + ": row " + std::to_string(row) + ": more than " +
                             std::to_string(kMaxCsvRanks) + " ranks (rows) are not supported");
    }
    std::vector<Action> prog;
    std::size_t col = 0;
    std::size_t start = 0;
    while (start <= line.size()) {
      std::size_t end = line.find(',', start);
      if (end == std::string::npos) end = line.size();
      ++col;
      std::string cell = line.substr(start, end - start);
      cell.erase(0, cell.find_first_not_of(" \t"));
      cell.erase(cell.find_last_not_of(" \t") + 1);
      if (!cell.empty()) {
        const std::string at = path + ": row " + std::to_string(row) + " (rank " +
                               std::to_string(row - 1) + "), column " + std::to_string(col) + ": ";
        auto actions = ParseCell(cell);
        if (!actions) return Error::BadInput(at + actions.error().message);
        for (const Action& a : *actions) {
          if (Status st = add(a, row, col, prog); !st) return st.error();
        }
      }
      start = end + 1;
    }
    s.programs.push_back(std::move(prog));
  }
  // Trailing empty rows are not ranks.
  while (!s.programs.empty() && s.programs.back().empty()) s.programs.pop_back();
  if (s.programs.empty()) return Error::BadInput(path + ": no actions (one row per rank expected)");
  s.num_ranks = static_cast<int>(s.programs.size());
  s.num_stages = max_stage + 1;
  s.num_microbatches = max_mb + 1;
  for (int st = 0; st < s.num_stages; ++st) {
    if (owner[static_cast<std::size_t>(st)] < 0) {
      return Error::BadInput(path + ": stage " + std::to_string(st) + " never appears, but stage " +
                             std::to_string(max_stage) +
                             " does (stages are numbered from 0 without gaps)");
    }
  }
  for (int r = 0; r < s.num_ranks; ++r) {
    if (s.programs[static_cast<std::size_t>(r)].empty()) {
      return Error::BadInput(path + ": row " + std::to_string(r + 1) + " (rank " +
                             std::to_string(r) + ") holds no action");
    }
  }
  if (s.num_microbatches < 1) return Error::BadInput(path + ": no action names a microbatch");
  if (s.num_stages % s.num_ranks != 0) {
    return Error::BadInput(path + ": " + std::to_string(s.num_stages) + " stages over " +
                           std::to_string(s.num_ranks) +
                           " ranks: every rank must hold the same number of stages");
  }
  s.stage_to_rank = std::move(owner);
  return s;
}

Expected<Schedule> LoadScheduleCsv(const std::string& path) {
  auto text = ReadInputFile(path, "the schedule CSV");
  if (!text) return text.error();
  return ParseScheduleCsv(*text, path);
}

}  // namespace pipetwin
