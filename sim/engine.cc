#include "sim/engine.h"

#include <algorithm>
#include <queue>
#include <stdexcept>

namespace pipetwin {
namespace {

struct Event {
  std::int64_t time;
  std::uint64_t seq;
  std::int32_t rank;
  // Min-heap on (time, seq): earliest first, ties in insertion order.
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

struct Link {
  int to;
  SimTime free;
};

struct RankState {
  std::size_t pc = 0;
  SimTime cursor;     // when the rank may issue its next action
  SimTime coll_free;  // collective stream
  bool passed_barrier = false;
  bool input_done = false;  // the compute at pc has waited for its received input
  std::vector<Link> links;
  std::vector<Action> deferred;  // REDUCE_GRADs held for the end of the backward
};

constexpr std::int64_t kUnknown = -1;

class Engine {
 public:
  Engine(const Schedule& s, const CostTable& c, const EngineOptions& o, SimObserver* obs)
      : s_(s),
        c_(c),
        opts_(o),
        obs_(obs),
        ranks_(static_cast<std::size_t>(s.num_ranks)),
        arrival_(static_cast<std::size_t>(s.num_stages) *
                     static_cast<std::size_t>(s.num_microbatches) * 2,
                 kUnknown),
        waiter_(arrival_.size(), -1),
        stage_(static_cast<std::size_t>(s.num_stages)) {
    stats_.ranks.resize(ranks_.size());
    for (const auto& prog : s.programs) {
      for (const Action& a : prog) {
        if (a.kind == ActionKind::kUnshard) stage_[static_cast<std::size_t>(a.stage)].fsdp = true;
      }
    }
  }

  SimStats Run() {
    for (int r = 0; r < s_.num_ranks; ++r) Push(SimTime(), r);
    std::int64_t last = 0;
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      if (e.time < last) throw std::logic_error("simulated time ran backwards");
      last = e.time;
      ++stats_.events_processed;
      Advance(e.rank, SimTime::FromNanos(e.time));
    }
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].pc != s_.programs[r].size()) {
        throw std::logic_error("simulation ended with rank " + std::to_string(r) +
                               " stuck at step " + std::to_string(ranks_[r].pc) +
                               " (the schedule was not validated)");
      }
      stats_.makespan = Max(stats_.makespan, SimTime::FromNanos(stats_.ranks[r].step.last_end_ns));
    }
    return std::move(stats_);
  }

 private:
  void Push(SimTime t, int rank) { queue_.push(Event{t.nanos(), seq_++, rank}); }

  std::size_t Slot(int sender_stage, int mb, int dir) const {
    return (static_cast<std::size_t>(sender_stage) * static_cast<std::size_t>(s_.num_microbatches) +
            static_cast<std::size_t>(mb)) *
               2 +
           static_cast<std::size_t>(dir);
  }

  Link& LinkTo(RankState& st, int to) {
    for (Link& l : st.links) {
      if (l.to == to) return l;
    }
    st.links.push_back(Link{to, SimTime()});
    return st.links.back();
  }

  void Record(int r, const Action& a, Stream stream, SimTime start, SimTime end, int peer,
              std::int64_t bytes) {
    stats_.ranks[static_cast<std::size_t>(r)].step.Add(stream, start.nanos(), end.nanos());
    ++stats_.actions;
    if (obs_ != nullptr) {
      obs_->OnEvent(r, TimelineEvent{a, stream, start.nanos(), end.nanos(), peer, bytes});
    }
  }

  SimTime ComputeCost(const Action& a) const {
    const StageTimes& t = c_.stages[static_cast<std::size_t>(a.stage)];
    const bool u = t.unshard_applies && stage_[static_cast<std::size_t>(a.stage)].unsharded;
    switch (a.kind) {
      case ActionKind::kForward:
        return u ? t.unsharded_forward : t.forward;
      case ActionKind::kBackward:
        return u ? t.unsharded_backward_input + t.unsharded_backward_weight : t.backward;
      case ActionKind::kBackwardInput:
        return u ? t.unsharded_backward_input : t.backward_input;
      case ActionKind::kBackwardWeight:
        return u ? t.unsharded_backward_weight : t.backward_weight;
      case ActionKind::kOptimizer:
        return t.optimizer;
      case ActionKind::kSendF:
      case ActionKind::kRecvF:
      case ActionKind::kSendB:
      case ActionKind::kRecvB:
      case ActionKind::kReduceGrad:
      case ActionKind::kWaitSendF:
      case ActionKind::kWaitSendB:
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
      case ActionKind::kWaitReduceGrad:
        break;
    }
    return SimTime();
  }

  // Before a compute whose input comes from another rank: waits for the data of the matching
  // receive (posted earlier) and records that wait as the receive's event. False while the
  // send has not happened yet (the sender wakes this rank).
  bool AwaitInput(int r, const Action& a, SimTime now) {
    RankState& st = ranks_[static_cast<std::size_t>(r)];
    const bool fwd = a.kind == ActionKind::kForward;
    if (!fwd && a.kind != ActionKind::kBackward && a.kind != ActionKind::kBackwardInput) {
      return true;
    }
    const int from_stage = fwd ? a.stage - 1 : a.stage + 1;
    if (from_stage < 0 || from_stage >= s_.num_stages ||
        s_.stage_to_rank[static_cast<std::size_t>(from_stage)] == r) {
      return true;
    }
    if (st.input_done) return true;  // waited already (woken after the data arrived)
    const std::size_t slot = Slot(from_stage, a.microbatch, fwd ? 0 : 1);
    if (arrival_[slot] == kUnknown) {
      waiter_[slot] = r;
      return false;
    }
    const Action recv{a.stage, fwd ? ActionKind::kRecvF : ActionKind::kRecvB, a.microbatch};
    const SimTime end = Max(st.cursor, SimTime::FromNanos(arrival_[slot]));
    Record(r, recv, Stream::kRecv, st.cursor, end, PeerRank(s_, recv), 0);
    st.cursor = end;
    if (end > now) {
      st.input_done = true;
      Push(end, r);
      return false;
    }
    return true;
  }

  bool Fsdp(int stage) const {
    return c_.stages[static_cast<std::size_t>(stage)].unshard_applies &&
           stage_[static_cast<std::size_t>(stage)].fsdp;
  }

  // A REDUCE_GRAD on the rank's collective stream, from its cursor on. A stage the program
  // unshards reduces its gradients here, once (FSDP); otherwise ZeRO-3 reduce-scattered them
  // in every W and dp_reduce is what is left.
  void Reduce(int r, const Action& a, RankState& st, RankStats& rs) {
    const StageTimes& t = c_.stages[static_cast<std::size_t>(a.stage)];
    const bool fsdp = Fsdp(a.stage);
    const SimTime start = Max(st.cursor, st.coll_free);
    const SimTime end = start + (fsdp ? t.unsharded_dp_reduce : t.dp_reduce);
    const std::int64_t bytes = fsdp ? t.unsharded_dp_reduce_bytes : t.dp_reduce_bytes;
    st.coll_free = end;
    Record(r, a, Stream::kCollective, start, end, -1, bytes);
    rs.bytes_sent_dp += bytes;
  }

  // The reductions held back (CostTable::reduce_after_backward), in program order, once the
  // rank's compute stream has reached its optimizer step (or the end of its program).
  void IssueDeferred(int r, RankState& st, RankStats& rs) {
    for (const Action& a : st.deferred) Reduce(r, a, st, rs);
    st.deferred.clear();
  }

  // Runs rank r's program from its program counter until it must wait for time to pass
  // (a compute action), for a message, or for the barrier.
  void Advance(int r, SimTime now) {
    RankState& st = ranks_[static_cast<std::size_t>(r)];
    RankStats& rs = stats_.ranks[static_cast<std::size_t>(r)];
    const auto& prog = s_.programs[static_cast<std::size_t>(r)];
    st.cursor = Max(st.cursor, now);
    while (st.pc < prog.size()) {
      const Action& a = prog[st.pc];
      switch (a.kind) {
        case ActionKind::kOptimizer:
          if (!st.passed_barrier) {
            IssueDeferred(r, st, rs);
            st.passed_barrier = true;
            if (st.coll_free > st.cursor) rs.dp_exposed = st.coll_free - st.cursor;
            // Gradients must be reduced before the step; with optimizer_sync every rank
            // also waits for all the others (Megatron's grad-norm and inf/NaN check).
            st.cursor = Max(st.cursor, st.coll_free);
            if (opts_.optimizer_sync) {
              barrier_time_ = Max(barrier_time_, st.cursor);
              if (++barrier_arrived_ < s_.num_ranks) return;  // released by the last one
              const SimTime release = barrier_time_ + c_.sync;
              for (int q = 0; q < s_.num_ranks; ++q) {
                if (q != r) Push(release, q);
              }
              st.cursor = release;
              if (release > now) {
                Push(release, r);
                return;
              }
            }
          }
          [[fallthrough]];
        case ActionKind::kForward:
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight: {
          if (!AwaitInput(r, a, now)) return;  // woken by the send or the arrival
          st.input_done = false;
          // An unsharded stage computes once its parameters have been gathered.
          const SimTime start =
              a.kind == ActionKind::kOptimizer
                  ? st.cursor
                  : Max(st.cursor, stage_[static_cast<std::size_t>(a.stage)].gathered);
          const SimTime end = start + ComputeCost(a);
          // OPT of a stage holding a tied embedding sends its gradients to the other copy.
          const std::int64_t sync_bytes =
              a.kind == ActionKind::kOptimizer
                  ? c_.stages[static_cast<std::size_t>(a.stage)].embedding_sync_bytes
                  : 0;
          rs.bytes_sent_pp += sync_bytes;
          Record(r, a, Stream::kCompute, start, end, -1, sync_bytes);
          st.cursor = end;
          ++st.pc;
          Push(end, r);
          return;
        }
        case ActionKind::kSendF:
        case ActionKind::kSendB: {
          const bool fwd = a.kind == ActionKind::kSendF;
          const int peer = PeerRank(s_, a);
          const StageTimes& t = c_.stages[static_cast<std::size_t>(a.stage)];
          Link& link = LinkTo(st, peer);
          const SimTime start = Max(st.cursor, link.free);
          const SimTime end = start + (fwd ? t.send_forward : t.send_backward);
          link.free = end;
          Record(r, a, Stream::kSend, start, end, peer, t.send_bytes);
          rs.bytes_sent_pp += t.send_bytes;
          const std::size_t slot = Slot(a.stage, a.microbatch, fwd ? 0 : 1);
          arrival_[slot] = end.nanos();
          if (waiter_[slot] >= 0) {
            const int w = waiter_[slot];
            waiter_[slot] = -1;
            Push(Max(end, now), w);
          }
          ++st.pc;
          if (c_.blocking_sends) {  // the rank's next action waits for this send
            st.cursor = end;
            if (end > now) {
              Push(end, r);
              return;
            }
          }
          break;
        }
        case ActionKind::kRecvF:
        case ActionKind::kRecvB:
          // A receive posts; the compute that consumes the data waits (AwaitInput).
          ++st.pc;
          break;
        case ActionKind::kWaitSendF:
        case ActionKind::kWaitSendB: {
          // The send's buffer is free once its transfer is done (validation put the send
          // earlier on this rank, so its end is known).
          const std::size_t slot =
              Slot(a.stage, a.microbatch, a.kind == ActionKind::kWaitSendF ? 0 : 1);
          st.cursor = Max(st.cursor, SimTime::FromNanos(std::max<std::int64_t>(arrival_[slot], 0)));
          ++st.pc;
          if (st.cursor > now) {
            Push(st.cursor, r);
            return;
          }
          break;
        }
        case ActionKind::kWaitReduceGrad:
          // The rank's collective stream runs reductions in order: this one is done when the
          // stream is free of everything issued so far.
          IssueDeferred(r, st, rs);
          st.cursor = Max(st.cursor, st.coll_free);
          ++st.pc;
          if (st.cursor > now) {
            Push(st.cursor, r);
            return;
          }
          break;
        case ActionKind::kUnshard: {
          // The stage's parameter all-gather, on the collective stream; its computes wait for
          // it (without FSDP it costs nothing).
          const StageTimes& t = c_.stages[static_cast<std::size_t>(a.stage)];
          StageState& ss = stage_[static_cast<std::size_t>(a.stage)];
          ss.unsharded = true;
          if (t.unshard_applies) {
            const SimTime start = Max(st.cursor, st.coll_free);
            const SimTime end = start + t.unshard;
            st.coll_free = end;
            ss.gathered = end;
            Record(r, a, Stream::kCollective, start, end, -1, t.unshard_bytes);
            rs.bytes_sent_dp += t.unshard_bytes;
          }
          ++st.pc;
          break;
        }
        case ActionKind::kReshard:
          stage_[static_cast<std::size_t>(a.stage)].unsharded = false;
          ++st.pc;
          break;
        case ActionKind::kReduceGrad:
          if (c_.reduce_after_backward && !Fsdp(a.stage)) {
            st.deferred.push_back(a);
          } else {
            Reduce(r, a, st, rs);
          }
          ++st.pc;
          break;
      }
    }
    IssueDeferred(r, st, rs);  // the end of a program without an optimizer step
  }

  const Schedule& s_;
  const CostTable& c_;
  EngineOptions opts_;
  SimObserver* obs_;
  std::vector<RankState> ranks_;
  std::vector<std::int64_t> arrival_;
  std::vector<int> waiter_;
  // Per stage, for UNSHARD/RESHARD: whether its program unshards it at all, whether its
  // parameters are gathered now, and when the last gather ends.
  struct StageState {
    bool fsdp = false;
    bool unsharded = false;
    SimTime gathered;
  };
  std::vector<StageState> stage_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  std::uint64_t seq_ = 0;
  SimTime barrier_time_;
  int barrier_arrived_ = 0;
  SimStats stats_;
};

}  // namespace

SimStats RunEngine(const Schedule& s, const CostTable& costs, const EngineOptions& opts,
                   SimObserver* observer) {
  return Engine(s, costs, opts, observer).Run();
}

CostTable UniformCosts(const AbstractCosts& c, int num_stages) {
  StageTimes t;
  t.forward = SimTime::FromMillis(c.forward_ms);
  t.backward_input = SimTime::FromMillis(c.backward_input_ms);
  t.backward_weight = SimTime::FromMillis(c.backward_weight_ms);
  t.backward = t.backward_input + t.backward_weight;
  t.send_forward = t.send_backward = SimTime::FromMillis(c.p2p_ms);
  t.dp_reduce = SimTime::FromMillis(c.dp_reduce_ms);
  t.optimizer = SimTime::FromMillis(c.optimizer_ms);
  CostTable table;
  table.stages.assign(static_cast<std::size_t>(num_stages), t);
  table.sync = SimTime::FromMillis(c.sync_ms);
  return table;
}

}  // namespace pipetwin
