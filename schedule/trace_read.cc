#include "schedule/trace_read.h"

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "schedule/action.h"
#include "schedule/file_io.h"

namespace pipetwin {
namespace {

// One field of an event, as the parser met it.
struct Field {
  enum Kind { kAbsent, kInt, kFloat, kString, kOther } kind = kAbsent;
  std::int64_t i = 0;
  double x = 0;
  std::string s;
  bool number() const { return kind == kInt || kind == kFloat; }
  double value() const { return kind == kInt ? static_cast<double>(i) : x; }
};

// Checks the events as they stream past (no document is built: a trace may be 256 MiB).
class TraceChecker : public nlohmann::json_sax<nlohmann::json> {
 public:
  TraceChecker(const std::string& path, const std::string& what, const ComputeSliceSink& sink)
      : where_(path + ": " + what), sink_(sink) {}

  std::string error;
  std::int64_t compute = 0;
  bool events_seen = false;

  bool null() override { return Scalar(Field{}); }
  bool boolean(bool) override { return Scalar(Field{}); }
  bool number_integer(number_integer_t v) override { return Scalar({Field::kInt, v, 0, {}}); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      return Scalar({Field::kFloat, 0, static_cast<double>(v), {}});
    }
    return Scalar({Field::kInt, static_cast<std::int64_t>(v), 0, {}});
  }
  bool number_float(number_float_t v, const string_t&) override {
    return Scalar({Field::kFloat, 0, v, {}});
  }
  // Of the strings, only an event's ph and name are read; the rest (args, names of threads) are
  // not copied.
  bool string(string_t& v) override {
    const bool kept = InEventsArray(1) && (key_ == "ph" || key_ == "name");
    return Scalar({Field::kString, 0, 0, kept ? v : std::string()});
  }
  bool binary(binary_t&) override { return Scalar(Field{}); }

  bool start_object(std::size_t) override {
    if (!Value('o')) return false;
    stack_.push_back('o');
    if (InEventsArray(1)) BeginEvent();
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    if (InEventsArray(0) && !EndEvent()) return false;
    if (stack_.empty() && !events_seen) {
      return Fail(
          ": no \"traceEvents\" array (a Chrome trace, as `simulate --trace` and `run "
          "--trace` write it)");
    }
    return true;
  }
  bool start_array(std::size_t) override {
    if (!Value('a')) return false;
    stack_.push_back('a');
    if (stack_.size() == 1 || (stack_.size() == 2 && key_ == "traceEvents")) {
      events_depth_ = stack_.size();
    }
    return true;
  }
  bool end_array() override {
    if (stack_.size() == events_depth_) events_seen = true;
    stack_.pop_back();
    return true;
  }
  bool key(string_t& k) override {
    if (stack_.size() == 1 || (events_depth_ > 0 && stack_.size() == events_depth_ + 1)) key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    // nlohmann's message repeats "syntax error while parsing value - "; keep what follows.
    std::string what = e.what();
    if (const auto at = what.find(" - "); at != std::string::npos) what = what.substr(at + 3);
    return Fail(": not JSON near byte " + std::to_string(position) + " (" + what + ")");
  }

 private:
  // True where the innermost container is the events array, `extra` levels above it.
  bool InEventsArray(std::size_t extra) const {
    return events_depth_ > 0 && stack_.size() == events_depth_ + extra;
  }
  bool Fail(const std::string& msg) {
    if (error.empty()) error = where_ + msg;
    return false;
  }
  // Any value (kind: 'o' object, 'a' array, 's' scalar): the top level's "traceEvents" must
  // be an array, and each of its elements an object.
  bool Value(char kind) {
    if (stack_.size() == 1 && stack_.back() == 'o' && key_ == "traceEvents" && kind != 'a') {
      return Fail(": \"traceEvents\" must be an array of events");
    }
    if (InEventsArray(0) && kind != 'o') {
      return Fail(": traceEvents[" + std::to_string(index_) + "] must be an object (an event)");
    }
    return true;
  }
  bool Scalar(Field f) {
    if (stack_.empty()) {
      return Fail(": must be a Chrome trace (an object with \"traceEvents\"), not a single value");
    }
    if (!Value('s')) return false;
    if (InEventsArray(1) && stack_.back() == 'o') {
      if (key_ == "ph") ph_ = std::move(f);
      if (key_ == "name") name_ = std::move(f);
      if (key_ == "pid") pid_ = f;
      if (key_ == "tid") tid_ = f;
      if (key_ == "ts") ts_ = f;
      if (key_ == "dur") dur_ = f;
    }
    return true;
  }
  void BeginEvent() { ph_ = name_ = pid_ = tid_ = ts_ = dur_ = Field{}; }
  bool EndEvent() {
    const std::string at = ": traceEvents[" + std::to_string(index_++) + "].";
    if (ph_.kind != Field::kString) {
      return Fail(at +
                  "ph must be a string (the event type: \"X\" for a slice, \"M\" for "
                  "metadata)");
    }
    if (ph_.s != "X") return true;
    const auto non_negative_int = [](const Field& f) { return f.kind == Field::kInt && f.i >= 0; };
    if (!non_negative_int(pid_)) return Fail(at + "pid must be an integer >= 0 (the rank)");
    if (!non_negative_int(tid_)) {
      return Fail(at + "tid must be an integer >= 0 (the stream: 0 is compute)");
    }
    if (name_.kind != Field::kString) return Fail(at + "name must be a string (the action)");
    if (!ts_.number() || !std::isfinite(ts_.value())) {
      return Fail(at + "ts must be a number (the start, in microseconds)");
    }
    if (!dur_.number() || !std::isfinite(dur_.value()) || dur_.value() < 0) {
      return Fail(at + "dur must be a number >= 0 (the duration, in microseconds)");
    }
    if (tid_.i == 0) {
      if (auto a = Action::Parse(name_.s); a && IsCompute(a->kind)) {
        ++compute;
        if (sink_) sink_({.rank = pid_.i, .action = *a, .dur_us = dur_.value()});
      }
    }
    return true;
  }

  std::string where_;
  ComputeSliceSink sink_;
  std::vector<char> stack_;
  std::size_t events_depth_ = 0;  // the stack's size inside the events array; 0: not yet
  std::string key_;               // the last key at the top level or in an event
  std::int64_t index_ = 0;        // the event being read
  Field ph_, name_, pid_, tid_, ts_, dur_;
};

Expected<std::string> Gunzip(const std::string& in, const std::string& where,
                             std::int64_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Error::Failure(where + ": zlib failed to start");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());  // at most max_bytes (ReadInputFile)
  std::string out;
  std::vector<char> buf(1 << 16);
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - z.avail_out);
    if (static_cast<std::int64_t>(out.size()) > max_bytes) {
      inflateEnd(&z);
      return Error::BadInput(where + ": larger than the limit of " + std::to_string(max_bytes) +
                             " bytes once uncompressed");
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      inflateReset(&z);  // gzip allows members one after another
      continue;
    }
    if (rc != Z_OK) {
      const std::string why = rc == Z_BUF_ERROR  ? "it ends before the stream does"
                              : z.msg != nullptr ? z.msg
                                                 : "data error";
      inflateEnd(&z);
      return Error::BadInput(where + ": not a valid gzip file (" + why + ")");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace

Expected<std::int64_t> CheckTraceJson(std::string_view json, const std::string& path,
                                      const std::string& what, const ComputeSliceSink& sink) {
  TraceChecker c(path, what, sink);
  const bool ok = nlohmann::json::sax_parse(json, &c);
  if (!ok || !c.error.empty()) {
    return Error::BadInput(c.error.empty() ? path + ": " + what + ": not a Chrome trace" : c.error);
  }
  if (!c.events_seen) {
    return Error::BadInput(path + ": " + what +
                           ": no \"traceEvents\" array (a Chrome trace, as `simulate --trace` "
                           "and `run --trace` write it)");
  }
  if (c.compute == 0) {
    return Error::BadInput(path + ": " + what +
                           ": no compute action (a slice named as \"2F0\" with \"tid\": 0) to "
                           "draw: not a trace from `simulate --trace` or `run --trace`");
  }
  return c.compute;
}

Expected<std::string> ReadTraceFile(const std::string& path, const std::string& what,
                                    std::int64_t max_bytes, const ComputeSliceSink& sink) {
  auto text = ReadInputFile(path, what, max_bytes);
  if (!text) return text.error();
  if (text->size() >= 2 && static_cast<unsigned char>((*text)[0]) == 0x1f &&
      static_cast<unsigned char>((*text)[1]) == 0x8b) {
    auto plain = Gunzip(*text, path + ": " + what, max_bytes);
    if (!plain) return plain.error();
    *text = std::move(*plain);
  }
  if (auto n = CheckTraceJson(*text, path, what, sink); !n) return n.error();
  return text;
}

std::string TraceTooLargeToReadNote(const std::string& path, std::int64_t json_bytes) {
  if (json_bytes <= kMaxTraceBytes) return {};
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.0f MiB", static_cast<double>(json_bytes) / (1 << 20));
  return path + " holds " + mib +
         " of trace events (as JSON, before compression); compare "
         "reads a trace back up to " +
         std::to_string(kMaxTraceBytes >> 20) +
         " MiB: a job with fewer microbatches or ranks gives a trace it can read";
}

}  // namespace pipetwin
