#include "schedule/validate.h"

#include <algorithm>
#include <sstream>

namespace pipetwin {
namespace {

constexpr int kNone = -1;

// Dense tables indexed by (kind, stage, microbatch); whole-stage kinds use microbatch 0.
class ActionTable {
 public:
  ActionTable(int stages, int microbatches)
      : stages_(stages),
        mbs_(microbatches),
        v_(static_cast<std::size_t>(kNumActionKinds) * static_cast<std::size_t>(stages) *
               static_cast<std::size_t>(microbatches),
           kNone) {}
  int& at(ActionKind k, int stage, int mb) { return v_[Index(k, stage, mb)]; }
  int at(ActionKind k, int stage, int mb) const { return v_[Index(k, stage, mb)]; }

 private:
  std::size_t Index(ActionKind k, int stage, int mb) const {
    return (static_cast<std::size_t>(k) * static_cast<std::size_t>(stages_) +
            static_cast<std::size_t>(stage)) *
               static_cast<std::size_t>(mbs_) +
           static_cast<std::size_t>(std::max(mb, 0));
  }

  int stages_;
  int mbs_;
  std::vector<int> v_;
};

std::string RankStep(int r, int step) {
  return "rank " + std::to_string(r) + ", step " + std::to_string(step);
}

Error Fail(const Schedule& s, const std::string& source, const std::string& what,
           std::vector<std::pair<int, int>> marks) {
  return Error::BadInput(source + ": invalid schedule: " + what + "\n" + FormatGrid(s, marks));
}

}  // namespace

std::string FormatGrid(const Schedule& s, const std::vector<std::pair<int, int>>& marks) {
  std::size_t len = 0;
  std::size_t width = 3;
  for (const auto& prog : s.programs) {
    len = std::max(len, prog.size());
    for (const Action& a : prog) width = std::max(width, a.ToString().size());
  }
  width += 2;  // room for the >mark<
  constexpr std::size_t kMaxCols = 24;
  std::size_t lo = 0;
  std::size_t hi = len;
  if (len > kMaxCols) {
    std::size_t mn = len;
    std::size_t mx = 0;
    for (const auto& [r, st] : marks) {
      mn = std::min(mn, static_cast<std::size_t>(st));
      mx = std::max(mx, static_cast<std::size_t>(st));
    }
    if (marks.empty()) mn = mx = 0;
    lo = mn > 4 ? mn - 4 : 0;
    hi = std::min(len, std::max(lo + kMaxCols, mx + 5));
    if (hi - lo > kMaxCols * 2) hi = lo + kMaxCols * 2;
  }
  std::ostringstream os;
  auto pad = [&](const std::string& t) {
    os << ' ' << std::string(width > t.size() ? width - t.size() : 0, ' ') << t;
  };
  os << "        step";
  for (std::size_t i = lo; i < hi; ++i) pad(std::to_string(i));
  if (hi < len) os << " ...";
  os << '\n';
  for (std::size_t r = 0; r < s.programs.size(); ++r) {
    std::string label = "rank " + std::to_string(r);
    os << std::string(12 > label.size() ? 12 - label.size() : 0, ' ') << label;
    const auto& prog = s.programs[r];
    for (std::size_t i = lo; i < hi; ++i) {
      std::string cell = i < prog.size() ? prog[i].ToString() : "";
      const bool marked =
          std::find(marks.begin(), marks.end(),
                    std::pair<int, int>(static_cast<int>(r), static_cast<int>(i))) != marks.end();
      if (marked) cell = ">" + (cell.empty() ? std::string("(end)") : cell) + "<";
      pad(cell);
    }
    os << '\n';
  }
  return os.str();
}

namespace {

// What the phases share: the schedule, where it came from (for messages) and the step of each
// action on its rank.
struct Checker {
  const Schedule& s;
  const std::string& source;
  ActionTable pos;

  int RankOf(int st) const { return s.stage_to_rank[static_cast<std::size_t>(st)]; }
};

// Phase 1: ranks, stages and microbatches exist, one program per rank, a rank per stage.
Status CheckShape(const Schedule& s, const std::string& source) {
  const int S = s.num_stages;
  const int M = s.num_microbatches;
  if (s.num_ranks < 1 || S < 1 || M < 1 || static_cast<int>(s.stage_to_rank.size()) != S ||
      static_cast<int>(s.programs.size()) != s.num_ranks) {
    return Error::BadInput(source + ": invalid schedule: empty or inconsistent shape");
  }
  return OkStatus();
}

// Phase 2: every action is in range, on the rank that holds its stage, and appears once;
// records its step in c.pos.
Status IndexActions(Checker& c) {
  const Schedule& s = c.s;
  const std::string& source = c.source;
  const int S = s.num_stages;
  const int M = s.num_microbatches;
  for (int r = 0; r < s.num_ranks; ++r) {
    const auto& prog = s.programs[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(prog.size()); ++i) {
      const Action& a = prog[static_cast<std::size_t>(i)];
      if (a.stage < 0 || a.stage >= S) {
        return Fail(s, source,
                    RankStep(r, i) + ": " + a.ToString() + " names stage " +
                        std::to_string(a.stage) + ", but stages are 0.." + std::to_string(S - 1),
                    {{r, i}});
      }
      if (c.RankOf(a.stage) != r) {
        return Fail(s, source,
                    RankStep(r, i) + ": " + a.ToString() + ": stage " + std::to_string(a.stage) +
                        " lives on rank " + std::to_string(c.RankOf(a.stage)),
                    {{r, i}});
      }
      if (HasMicrobatch(a.kind) && (a.microbatch < 0 || a.microbatch >= M)) {
        return Fail(s, source,
                    RankStep(r, i) + ": " + a.ToString() + ": microbatch out of 0.." +
                        std::to_string(M - 1),
                    {{r, i}});
      }
      // FSDP may gather and free a stage's parameters several times in a step.
      if (a.kind == ActionKind::kUnshard || a.kind == ActionKind::kReshard) continue;
      int& p = c.pos.at(a.kind, a.stage, a.microbatch);
      if (p != kNone) {
        return Fail(s, source,
                    RankStep(r, i) + ": " + a.ToString() + " appears twice (first at step " +
                        std::to_string(p) + ")",
                    {{r, p}, {r, i}});
      }
      p = i;
    }
  }
  return OkStatus();
}

// "stage S, microbatch M (rank R)", for messages; built only when something fails, since
// validation runs on every simulated configuration.
std::string Where(int st, int mb, int r) {
  return "stage " + std::to_string(st) + ", microbatch " + std::to_string(mb) + " (rank " +
         std::to_string(r) + ")";
}

// Phase 3a: the stage runs F once for the microbatch, and either B once or I and W once.
Status CheckComputeCounts(const Checker& c, int st, int mb) {
  const Schedule& s = c.s;
  const std::string& source = c.source;
  const int r = c.RankOf(st);
  if (c.pos.at(ActionKind::kForward, st, mb) == kNone) {
    return Fail(
        s, source,
        Where(st, mb, r) + ": no forward " + Action{st, ActionKind::kForward, mb}.ToString(), {});
  }
  const int b = c.pos.at(ActionKind::kBackward, st, mb);
  const int in = c.pos.at(ActionKind::kBackwardInput, st, mb);
  const int w = c.pos.at(ActionKind::kBackwardWeight, st, mb);
  if (b != kNone && (in != kNone || w != kNone)) {
    return Fail(s, source, Where(st, mb, r) + ": has both a full backward B and a split I/W",
                {{r, b}, {r, in != kNone ? in : w}});
  }
  if (b == kNone && (in == kNone || w == kNone)) {
    const char* missing = in == kNone && w == kNone ? "no backward (B, or I and W)"
                          : in == kNone             ? "a W without its I"
                                                    : "an I without its W";
    return Fail(s, source, Where(st, mb, r) + ": " + missing,
                in != kNone  ? std::vector<std::pair<int, int>>{{r, in}}
                : w != kNone ? std::vector<std::pair<int, int>>{{r, w}}
                             : std::vector<std::pair<int, int>>{});
  }
  return OkStatus();
}

// Phase 3b, with communication: one SEND and one RECV per cross-rank edge of the stage and
// microbatch, and none where the neighbouring stage is on the same rank or does not exist.
Status CheckSendRecvPairs(const Checker& c, int st, int mb) {
  const Schedule& s = c.s;
  const std::string& source = c.source;
  const int S = s.num_stages;
  const int r = c.RankOf(st);
  struct Edge {
    ActionKind kind;
    int stage;
    bool needed;
  };
  const bool down = st < S - 1 && c.RankOf(st + 1) != r;  // to the next stage
  const bool up = st > 0 && c.RankOf(st - 1) != r;        // to the previous stage
  const Edge edges[] = {{ActionKind::kSendF, st, down},
                        {ActionKind::kRecvF, st, up},
                        {ActionKind::kSendB, st, up},
                        {ActionKind::kRecvB, st, down}};
  for (const auto& [wait, send] : {std::pair{ActionKind::kWaitSendF, ActionKind::kSendF},
                                   std::pair{ActionKind::kWaitSendB, ActionKind::kSendB}}) {
    const int w = c.pos.at(wait, st, mb);
    if (w != kNone && c.pos.at(send, st, mb) == kNone) {
      return Fail(s, source,
                  RankStep(r, w) + ": " + Action{st, wait, mb}.ToString() + " has no " +
                      Action{st, send, mb}.ToString() + " to wait for",
                  {{r, w}});
    }
  }
  for (const Edge& e : edges) {
    const int p = c.pos.at(e.kind, e.stage, mb);
    if (e.needed && p == kNone) {
      return Fail(s, source,
                  Where(st, mb, r) + ": missing " + Action{e.stage, e.kind, mb}.ToString() +
                      " (the neighbouring stage lives on another rank)",
                  {});
    }
    if (!e.needed && p != kNone) {
      return Fail(s, source,
                  RankStep(r, p) + ": " + Action{e.stage, e.kind, mb}.ToString() +
                      " has no peer (the neighbouring stage is on the same rank or does not "
                      "exist)",
                  {{r, p}});
    }
  }
  return OkStatus();
}

// Phase 3: counts, stage by stage and microbatch by microbatch.
Status CheckCounts(const Checker& c) {
  const bool comms = c.s.HasComms();
  for (int st = 0; st < c.s.num_stages; ++st) {
    for (int mb = 0; mb < c.s.num_microbatches; ++mb) {
      if (Status e = CheckComputeCounts(c, st, mb); !e) return e;
      if (!comms) continue;
      if (Status e = CheckSendRecvPairs(c, st, mb); !e) return e;
    }
  }
  return OkStatus();
}

// On rank r, sa's action ka of microbatch mb comes before sb's kb (when both exist), else
// the error, with `why`.
Status Before(const Checker& c, int r, ActionKind ka, int sa, ActionKind kb, int sb, int mb,
              const char* why) {
  const int pa = c.pos.at(ka, sa, mb);
  const int pb = c.pos.at(kb, sb, mb);
  if (pa == kNone || pb == kNone || pa < pb) return OkStatus();
  const std::string na = Action{sa, ka, mb}.ToString();
  const std::string nb = Action{sb, kb, mb}.ToString();
  return Fail(c.s, c.source,
              "rank " + std::to_string(r) + ": " + nb + " (step " + std::to_string(pb) +
                  ") comes before " + na + " (step " + std::to_string(pa) + "): " + why,
              {{r, pa}, {r, pb}});
}

// Phase 4a: one microbatch's order on its stage's rank: F, I (or B) and W, receives before
// and sends after their compute, and chunks of the same rank in model order.
Status CheckMicrobatchOrder(const Checker& c, int st, int mb) {
  const int r = c.RankOf(st);
  const bool split = c.pos.at(ActionKind::kBackward, st, mb) == kNone;
  const ActionKind ig = split ? ActionKind::kBackwardInput : ActionKind::kBackward;
  const Status checks[] = {
      Before(c, r, ActionKind::kForward, st, ig, st, mb, "a backward needs its forward first"),
      Before(c, r, ActionKind::kBackwardInput, st, ActionKind::kBackwardWeight, st, mb,
             "W needs the output gradient that I receives"),
      Before(c, r, ActionKind::kRecvF, st, ActionKind::kForward, st, mb,
             "a forward needs its input received first"),
      Before(c, r, ActionKind::kForward, st, ActionKind::kSendF, st, mb,
             "a send needs the forward's output"),
      Before(c, r, ActionKind::kRecvB, st, ig, st, mb,
             "a backward needs its gradient received first"),
      Before(c, r, ig, st, ActionKind::kSendB, st, mb,
             "a send needs the backward's input gradient"),
      Before(c, r, ActionKind::kSendF, st, ActionKind::kWaitSendF, st, mb,
             "WAIT_SEND_F waits for a send already posted"),
      Before(c, r, ActionKind::kSendB, st, ActionKind::kWaitSendB, st, mb,
             "WAIT_SEND_B waits for a send already posted"),
  };
  for (const Status& e : checks) {
    if (!e) return e;
  }
  if (st > 0 && c.RankOf(st - 1) == r) {
    if (Status e = Before(c, r, ActionKind::kForward, st - 1, ActionKind::kForward, st, mb,
                          "a chunk's forward needs the previous chunk's output");
        !e) {
      return e;
    }
  }
  if (st < c.s.num_stages - 1 && c.RankOf(st + 1) == r) {
    const bool split_next = c.pos.at(ActionKind::kBackward, st + 1, mb) == kNone;
    if (Status e =
            Before(c, r, split_next ? ActionKind::kBackwardInput : ActionKind::kBackward, st + 1,
                   ig, st, mb, "a chunk's backward needs the next chunk's input gradient");
        !e) {
      return e;
    }
  }
  return OkStatus();
}

// Phase 4b: the stage's REDUCE_GRAD and OPT come after its last gradient (OPT also after
// REDUCE_GRAD).
Status CheckStageTail(const Checker& c, int st) {
  const int r = c.RankOf(st);
  int last_grad = kNone;
  for (int mb = 0; mb < c.s.num_microbatches; ++mb) {
    const bool split = c.pos.at(ActionKind::kBackward, st, mb) == kNone;
    last_grad = std::max(
        last_grad, c.pos.at(split ? ActionKind::kBackwardWeight : ActionKind::kBackward, st, mb));
  }
  const int rg = c.pos.at(ActionKind::kReduceGrad, st, 0);
  const int opt = c.pos.at(ActionKind::kOptimizer, st, 0);
  const int wrg = c.pos.at(ActionKind::kWaitReduceGrad, st, 0);
  if (wrg != kNone && (rg == kNone || wrg < rg)) {
    return Fail(c.s, c.source,
                "rank " + std::to_string(r) + ": " + std::to_string(st) +
                    "WAIT_REDUCE_GRAD has no " + std::to_string(st) + "REDUCE_GRAD before it",
                {{r, wrg}});
  }
  if (rg != kNone && rg < last_grad) {
    return Fail(c.s, c.source,
                "rank " + std::to_string(r) + ": " + std::to_string(st) +
                    "REDUCE_GRAD comes before the last gradient of its stage",
                {{r, rg}, {r, last_grad}});
  }
  if (opt != kNone && (opt < last_grad || (rg != kNone && opt < rg))) {
    return Fail(c.s, c.source,
                "rank " + std::to_string(r) + ": " + std::to_string(st) +
                    "OPT comes before its stage's gradients are complete",
                {{r, opt}, {r, std::max(last_grad, rg)}});
  }
  return OkStatus();
}

// Phase 4: order on each rank, stage by stage.
Status CheckOrder(const Checker& c) {
  for (int st = 0; st < c.s.num_stages; ++st) {
    for (int mb = 0; mb < c.s.num_microbatches; ++mb) {
      if (Status e = CheckMicrobatchOrder(c, st, mb); !e) return e;
    }
    if (Status e = CheckStageTail(c, st); !e) return e;
  }
  return OkStatus();
}

// Whether `a` can run in the dry run, given the actions done so far. A receive only posts
// (torch's meaning: its wait is at the compute that consumes the data), so sends and receives
// never block; a compute action whose input crosses ranks waits for the matching send (or,
// where the schedule carries no communication, for the producing compute).
bool Ready(const Checker& c, const ActionTable& done, bool comms, const Action& a) {
  const int st = a.stage;
  const int mb = a.microbatch;
  switch (a.kind) {
    case ActionKind::kForward:
      if (st == 0 || c.RankOf(st - 1) == c.RankOf(st)) return true;
      if (comms) return done.at(ActionKind::kSendF, st - 1, mb) != kNone;
      return done.at(ActionKind::kForward, st - 1, mb) != kNone;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      if (st == c.s.num_stages - 1 || c.RankOf(st + 1) == c.RankOf(st)) return true;
      if (comms) return done.at(ActionKind::kSendB, st + 1, mb) != kNone;
      return done.at(ActionKind::kBackward, st + 1, mb) != kNone ||
             done.at(ActionKind::kBackwardInput, st + 1, mb) != kNone;
    case ActionKind::kRecvF:
    case ActionKind::kRecvB:
    case ActionKind::kBackwardWeight:
    case ActionKind::kSendF:
    case ActionKind::kSendB:
    case ActionKind::kReduceGrad:
    case ActionKind::kOptimizer:
    case ActionKind::kWaitSendF:
    case ActionKind::kWaitSendB:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
    case ActionKind::kWaitReduceGrad:
      return true;  // local order was checked above
  }
  return true;
}

// Phase 6: the deadlock error: what each stuck rank's next action waits for, marked on the
// grid.
Error DeadlockError(const Checker& c, const std::vector<std::size_t>& pc) {
  const Schedule& s = c.s;
  std::string why = "deadlock: no rank can make progress";
  std::vector<std::pair<int, int>> marks;
  for (int r = 0; r < s.num_ranks; ++r) {
    const auto& prog = s.programs[static_cast<std::size_t>(r)];
    const std::size_t i = pc[static_cast<std::size_t>(r)];
    if (i >= prog.size()) continue;
    const Action& a = prog[i];
    std::string waits;
    const bool comms = s.HasComms();
    switch (a.kind) {
      case ActionKind::kForward:
        waits = comms ? Action{a.stage - 1, ActionKind::kSendF, a.microbatch}.ToString()
                      : Action{a.stage - 1, ActionKind::kForward, a.microbatch}.ToString();
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        waits = comms ? Action{a.stage + 1, ActionKind::kSendB, a.microbatch}.ToString()
                      : "the next stage's backward of microbatch " + std::to_string(a.microbatch);
        break;
      default:
        waits = "the next stage's backward of microbatch " + std::to_string(a.microbatch);
        break;
    }
    why += "\n  " + RankStep(r, static_cast<int>(i)) + ": " + a.ToString() + " waits for " + waits;
    marks.emplace_back(r, static_cast<int>(i));
  }
  return Fail(s, c.source, why, marks);
}

// Phase 5: the dry run over all ranks, each as far as it can go, until every action ran
// (valid) or no rank can make progress (the deadlock error).
Status DryRun(const Checker& c) {
  const Schedule& s = c.s;
  const bool comms = s.HasComms();
  ActionTable done(s.num_stages, s.num_microbatches);  // 1 once executed
  std::vector<std::size_t> pc(static_cast<std::size_t>(s.num_ranks), 0);
  bool progress = true;
  std::size_t remaining = s.NumActions();
  while (remaining > 0 && progress) {
    progress = false;
    for (int r = 0; r < s.num_ranks; ++r) {
      const auto& prog = s.programs[static_cast<std::size_t>(r)];
      std::size_t& i = pc[static_cast<std::size_t>(r)];
      while (i < prog.size() && Ready(c, done, comms, prog[i])) {
        done.at(prog[i].kind, prog[i].stage, prog[i].microbatch) = 1;
        ++i;
        --remaining;
        progress = true;
      }
    }
  }
  if (remaining > 0) return DeadlockError(c, pc);
  return OkStatus();
}

}  // namespace

// The phases in order; the first failure is the error.
Status ValidateSchedule(const Schedule& s, const std::string& source) {
  if (Status e = CheckShape(s, source); !e) return e;
  Checker c{s, source, ActionTable(s.num_stages, s.num_microbatches)};
  if (Status e = IndexActions(c); !e) return e;
  if (Status e = CheckCounts(c); !e) return e;
  if (Status e = CheckOrder(c); !e) return e;
  return DryRun(c);
}

}  // namespace pipetwin
