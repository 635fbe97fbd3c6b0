#include "schedule/trace.h"

#include "schedule/atomic_file.h"

#include <map>
#include <tuple>

#include "schedule/quote.h"

namespace pipetwin {
namespace {

// Microseconds with nanosecond precision, printed exactly from the integer.
std::string Us(std::int64_t ns) {
  const bool neg = ns < 0;
  const std::uint64_t a = neg ? static_cast<std::uint64_t>(-ns) : static_cast<std::uint64_t>(ns);
  std::string frac = std::to_string(a % 1000);
  frac.insert(0, 3 - frac.size(), '0');
  return (neg ? "-" : "") + std::to_string(a / 1000) + "." + frac;
}

const char* StreamName(Stream s) {
  switch (s) {
    case Stream::kCompute:
      return "compute";
    case Stream::kSend:
      return "send";
    case Stream::kRecv:
      return "recv";
    case Stream::kCollective:
      return "collective";
  }
  return "?";
}

// A JSON string's contents: quotes, backslashes, control characters (a tab in a job's path)
// and bytes that are not UTF-8 all escaped, so the trace stays valid JSON.
std::string Escape(const std::string& s) { return JsonEscape(s); }

}  // namespace

void StreamTraceJson(const Timeline& t, const std::string& title, const TraceSink& sink) {
  // Events gather in a buffer handed to the sink whenever it passes kChunk bytes.
  constexpr std::size_t kChunk = 1 << 20;
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"title\":\"" + Escape(title) +
                    "\"},\"traceEvents\":[\n";
  out.reserve(kChunk + 4096);
  bool first = true;
  auto emit = [&](const std::string& e) {
    if (!first) out += ",\n";
    out += e;
    first = false;
    if (out.size() >= kChunk) {
      sink(out);
      out.clear();
    }
  };
  for (int r = 0; r < t.num_ranks(); ++r) {
    const std::string pid = std::to_string(r);
    emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":\"rank " +
         pid + "\"}}");
    emit("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
         ",\"args\":{\"sort_index\":" + pid + "}}");
    for (int s = 0; s < kNumStreams; ++s) {
      emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid +
           ",\"tid\":" + std::to_string(s) + ",\"args\":{\"name\":\"" +
           StreamName(static_cast<Stream>(s)) + "\"}}");
    }
  }
  // Flow ids: one per (stage, kind direction, microbatch) send→recv pair.
  std::map<std::tuple<int, int, int>, int> flow_id;
  auto key_of = [](const Action& a) {
    // Keyed by the send's side (PeerStage: the one rule for who talks to whom).
    const bool is_send = a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB;
    const Action send = is_send ? a : MatchingP2P(a);
    return std::make_tuple(send.stage, send.kind == ActionKind::kSendF ? 0 : 1, send.microbatch);
  };
  for (int r = 0; r < t.num_ranks(); ++r) {
    for (const TimelineEvent& e : t.events[static_cast<std::size_t>(r)]) {
      if (e.action.kind == ActionKind::kSendF || e.action.kind == ActionKind::kSendB) {
        flow_id.emplace(key_of(e.action), static_cast<int>(flow_id.size()) + 1);
      }
    }
  }
  for (int r = 0; r < t.num_ranks(); ++r) {
    const std::string pid = std::to_string(r);
    for (const TimelineEvent& e : t.events[static_cast<std::size_t>(r)]) {
      const std::string tid = std::to_string(static_cast<int>(e.stream));
      const std::string name = e.action.ToString();
      std::string ev = "{\"ph\":\"X\",\"name\":\"" + name + "\",\"cat\":\"" +
                       std::string(KindName(e.action.kind)) + "\",\"pid\":" + pid +
                       ",\"tid\":" + tid + ",\"ts\":" + Us(e.start_ns) +
                       ",\"dur\":" + Us(e.end_ns - e.start_ns) +
                       ",\"args\":{\"stage\":" + std::to_string(e.action.stage) +
                       ",\"microbatch\":" + std::to_string(e.action.microbatch);
      if (e.peer >= 0) ev += ",\"peer\":" + std::to_string(e.peer);
      if (e.bytes > 0) ev += ",\"bytes\":" + std::to_string(e.bytes);
      ev += "}}";
      emit(ev);
      const bool send = e.action.kind == ActionKind::kSendF || e.action.kind == ActionKind::kSendB;
      const bool recv = e.action.kind == ActionKind::kRecvF || e.action.kind == ActionKind::kRecvB;
      if (send || recv) {
        auto it = flow_id.find(key_of(e.action));
        if (it == flow_id.end()) continue;
        // The arrow leaves the send where the transfer starts and lands where it ends.
        emit(std::string("{\"ph\":\"") + (send ? "s" : "f") +
             "\",\"name\":\"p2p\",\"cat\":\"p2p\",\"id\":" + std::to_string(it->second) +
             ",\"pid\":" + pid + ",\"tid\":" + tid + ",\"ts\":" + Us(send ? e.start_ns : e.end_ns) +
             (recv ? ",\"bp\":\"e\"" : "") + "}");
      }
    }
  }
  out += "\n]}\n";
  sink(out);
}

std::string TraceJson(const Timeline& t, const std::string& title) {
  std::string all;
  StreamTraceJson(t, title, [&](std::string_view piece) { all += piece; });
  return all;
}

Status WriteTraceFile(const std::string& path, const Timeline& t, const std::string& title,
                      std::int64_t* json_bytes) {
  auto w = AtomicFileWriter::Open(path, CompressionFor(path));
  if (!w) return w.error();
  Status status = OkStatus();
  std::int64_t bytes = 0;
  StreamTraceJson(t, title, [&](std::string_view piece) {
    bytes += static_cast<std::int64_t>(piece.size());
    if (status) status = w->Write(piece);
  });
  if (!status) return status;
  if (json_bytes) *json_bytes = bytes;
  return w->Commit();
}

}  // namespace pipetwin
