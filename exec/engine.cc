#include "exec/engine.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>

#include "exec/mpi_util.h"

namespace pipetwin::exec {

Engine::Engine(const Schedule& s, int pp_rank, int world_rank, Backend& backend, EngineOptions opts)
    : s_(s),
      pp_rank_(pp_rank),
      world_rank_(world_rank),
      backend_(backend),
      opts_(std::move(opts)) {}

int Engine::PeerOf(const Action& a) const { return PeerRank(s_, a); }

std::vector<TimelineEvent> Engine::RunStep(std::int64_t step) {
  const auto t0 = Clock::now();
  const auto timeout =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts_.timeout_s));
  auto ns = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count();
  };
  auto describe = [&](const Action& a, int peer) {
    std::string d = "rank " + std::to_string(world_rank_) + " (pipeline rank " +
                    std::to_string(pp_rank_) + "), action " + a.ToString();
    if (peer >= 0) d += ", peer pipeline rank " + std::to_string(peer);
    return d + ", after " + std::to_string(opts_.timeout_s) + " s";
  };

  const auto& prog = s_.programs[static_cast<std::size_t>(pp_rank_)];
  std::vector<TimelineEvent> events;
  events.reserve(prog.size());
  backend_.BeginStep(step);

  // Early-posted receives: a window over the receives in program order.
  std::vector<std::size_t> recvs;
  for (std::size_t i = 0; i < prog.size(); ++i) {
    if (prog[i].kind == ActionKind::kRecvF || prog[i].kind == ActionKind::kRecvB) {
      recvs.push_back(i);
    }
  }
  std::size_t posted = 0;
  auto post_until = [&](std::size_t n) {
    while (posted < std::min(n, recvs.size())) {
      const Action& r = prog[recvs[posted]];
      backend_.PostRecv(r, PeerOf(r));
      ++posted;
    }
  };
  post_until(static_cast<std::size_t>(std::max(1, opts_.recv_window)));
  std::size_t recvs_done = 0;
  // The compute that consumes a received input waits for it there (a RECV only posts, as in
  // torch's runtime); the wait is the receive's event.
  const auto& placement = s_.stage_to_rank;
  const auto on_other_rank = [&](int stage) {
    return stage >= 0 && stage < s_.num_stages &&
           placement[static_cast<std::size_t>(stage)] != pp_rank_;
  };
  auto await_input = [&](const Action& a) {
    const bool fwd = a.kind == ActionKind::kForward;
    if (!fwd && a.kind != ActionKind::kBackward && a.kind != ActionKind::kBackwardInput) return;
    if (!on_other_rank(fwd ? a.stage - 1 : a.stage + 1)) return;
    const Action r{a.stage, fwd ? ActionKind::kRecvF : ActionKind::kRecvB, a.microbatch};
    const int peer = PeerOf(r);
    const auto s = Clock::now();
    WaitFor(
        s + timeout, [&] { return backend_.TestRecv(r); }, [&] { return describe(r, peer); });
    events.push_back({r, Stream::kRecv, ns(s), ns(Clock::now()), peer, 0});
    ++recvs_done;
    post_until(recvs_done + static_cast<std::size_t>(std::max(1, opts_.recv_window)));
  };
  std::size_t recvs_seen = 0;

  // Gradient reductions in flight, completed opportunistically.
  struct Pending {
    int stage;
    std::size_t event;
  };
  std::deque<Pending> reductions;
  auto poll_reductions = [&] {
    while (!reductions.empty() && backend_.TestReduceGrad(reductions.front().stage)) {
      events[reductions.front().event].end_ns = ns(Clock::now());
      reductions.pop_front();
    }
  };
  auto drain_reductions = [&](const Action& at) {
    while (!reductions.empty()) {
      const Pending p = reductions.front();
      WaitFor(
          Clock::now() + timeout, [&] { return backend_.TestReduceGrad(p.stage); },
          [&] {
            return describe(Action{p.stage, ActionKind::kReduceGrad, -1}, -1) + " (waited for at " +
                   at.ToString() + ")";
          });
      events[p.event].end_ns = ns(Clock::now());
      reductions.pop_front();
    }
  };

  auto start_reduction = [&](const Action& a) {
    const auto s = Clock::now();
    backend_.StartReduceGrad(a.stage);
    events.push_back({a, Stream::kCollective, ns(s), ns(s), -1, 0});
    reductions.push_back({a.stage, events.size() - 1});
    poll_reductions();
  };
  // REDUCE_GRADs held until the end of the backward (EngineOptions::reduce_after_backward).
  std::vector<Action> held;
  auto start_held = [&] {
    for (const Action& h : held) start_reduction(h);
    held.clear();
  };
  bool synced = false;
  for (const Action& a : prog) {
    switch (a.kind) {
      case ActionKind::kOptimizer:
        if (!synced) {
          start_held();
          drain_reductions(a);
          if (opts_.before_optimizer) opts_.before_optimizer(Clock::now() + timeout);
          synced = true;
        }
        [[fallthrough]];
      case ActionKind::kForward:
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight: {
        await_input(a);
        const auto s = Clock::now();
        backend_.Compute(a);
        events.push_back({a, Stream::kCompute, ns(s), ns(Clock::now()), -1, 0});
        poll_reductions();
        backend_.TestSends();  // releases the buffers of completed sends
        break;
      }
      case ActionKind::kSendF:
      case ActionKind::kSendB: {
        const int peer = PeerOf(a);
        const auto s = Clock::now();
        backend_.PostSend(a, peer);
        events.push_back({a, Stream::kSend, ns(s), ns(Clock::now()), peer, 0});
        break;
      }
      case ActionKind::kRecvF:
      case ActionKind::kRecvB:
        post_until(++recvs_seen);  // this one, if the window had not reached it
        break;
      case ActionKind::kWaitSendF:
      case ActionKind::kWaitSendB:
        // The backends keep a send's buffer until the send completes (TestSends): nothing to
        // wait for before the buffer is reused.
        backend_.TestSends();
        break;
      case ActionKind::kWaitReduceGrad:
        start_held();
        drain_reductions(a);
        break;
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
        break;  // the executor's models are not sharded (no FSDP)
      case ActionKind::kReduceGrad:
        if (opts_.reduce_after_backward) {
          held.push_back(a);
        } else {
          start_reduction(a);
        }
        break;
    }
  }
  start_held();
  const Action end_marker{0, ActionKind::kOptimizer, -1};
  drain_reductions(end_marker);
  WaitFor(
      Clock::now() + timeout, [&] { return backend_.TestSends(); },
      [&] {
        return "rank " + std::to_string(world_rank_) +
               ": sends of the step not completed (a peer stopped receiving)";
      });
  return events;
}

}  // namespace pipetwin::exec
