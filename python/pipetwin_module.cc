// pipetwin_module.cc — the Python module `pipetwin` (pybind11) over the same libraries as the
// command line: a job given as a dict goes through ParseJob like a job file, so every check
// and message is the CLI's; bad input raises ValueError with the CLI's message, the file
// named "<dict>" (relative `csv:` schedule paths resolve against the current directory).
//
//   import pipetwin, yaml
//   job = yaml.safe_load(open("examples/schedules/1f1b.yaml"))
//   pipetwin.simulate(job)["iteration_time_ms"]          # 33.0, as `pipetwin simulate --report`
//   pipetwin.schedule(job)[0][:3]                        # ['0F0', '0SEND_F0', '0F1']
//   pipetwin.schedule(job, format="compute_only")[0][:3] # ['0F0', '0F1', '0F2']
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "job/job.h"
#include "schedule/csv.h"
#include "schedule/report.h"
#include "sim/plan.h"
#include "sim/simulate.h"

namespace py = pybind11;

namespace pipetwin {
namespace {

// The name job messages give the dict, where a file's would be its path.
constexpr const char* kDictPath = "<dict>";

[[noreturn]] void Raise(const Error& e) {
  if (e.code == ErrorCode::kBadInput) throw py::value_error(e.message);
  throw std::runtime_error(e.message);
}

// The deepest a job or plan dict may nest (theirs is at most 4: execution.stragglers[i].x).
// Deeper is bad input, not a stack overflow: a dict that contains itself never ends.
constexpr int kMaxDictDepth = 16;

// A Python value to YAML, block style, keys in the dict's order (so that messages' lines are
// those of the same dict written as a file by yaml.safe_dump(d, sort_keys=False)).
void Emit(YAML::Emitter& e, const py::handle& v, const std::string& where, int depth = 0) {
  if (depth > kMaxDictDepth) {
    throw py::value_error(std::string(kDictPath) + ": " + where + ": nested deeper than " +
                          std::to_string(kMaxDictDepth) +
                          " levels (a job is at most 4 deep: does a dict or a list contain "
                          "itself?)");
  }
  if (v.is_none()) {
    e << YAML::Null;
  } else if (py::isinstance<py::bool_>(v)) {
    e << v.cast<bool>();
  } else if (py::isinstance<py::int_>(v)) {
    e << py::str(v).cast<std::string>();  // exact, whatever the size
  } else if (py::isinstance<py::float_>(v)) {
    const double d = v.cast<double>();
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);  // shortest round trip
    e << std::string(buf, r.ptr);
  } else if (py::isinstance<py::str>(v)) {
    e << v.cast<std::string>();
  } else if (py::isinstance<py::dict>(v)) {
    e << YAML::BeginMap;
    for (const auto& [k, val] : v.cast<py::dict>()) {
      if (!py::isinstance<py::str>(k)) {
        throw py::value_error(std::string(kDictPath) + ": " + where +
                              ": keys must be strings, got " + py::repr(k).cast<std::string>());
      }
      const std::string key = k.cast<std::string>();
      e << YAML::Key << key << YAML::Value;
      Emit(e, val, where.empty() ? key : where + "." + key, depth + 1);
    }
    e << YAML::EndMap;
  } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    e << YAML::Flow << YAML::BeginSeq;
    for (const auto& item : v) Emit(e, item, where, depth + 1);
    e << YAML::EndSeq;
  } else {
    throw py::value_error(std::string(kDictPath) + ": " + where + ": cannot be a Python " +
                          py::str(py::type::of(v).attr("__name__")).cast<std::string>());
  }
}

// The dict as the job's YAML text.
std::string JobYaml(const py::dict& job) {
  YAML::Emitter e;
  Emit(e, job, "");
  if (!e.good()) throw py::value_error(std::string(kDictPath) + ": " + e.GetLastError());
  return std::string(e.c_str()) + "\n";
}

ResolvedJob Resolve(const py::dict& job) {
  const std::string yaml = JobYaml(job);
  Expected<ResolvedJob> r = [&] {
    py::gil_scoped_release unlocked;
    return ParseJob(yaml, kDictPath);
  }();
  if (!r) Raise(r.error());
  return std::move(*r);
}

py::object ToPython(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return py::none();
    case nlohmann::ordered_json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return py::int_(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return py::int_(j.get<std::uint64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return py::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      py::list l;
      for (const auto& x : j) l.append(ToPython(x));
      return l;
    }
    case nlohmann::ordered_json::value_t::object: {
      py::dict d;
      for (const auto& [k, x] : j.items()) d[py::str(k)] = ToPython(x);
      return d;
    }
    case nlohmann::ordered_json::value_t::binary:
    case nlohmann::ordered_json::value_t::discarded:
      break;
  }
  return py::none();
}

py::object SimulateJob(const py::dict& job_dict) {
  const ResolvedJob job = Resolve(job_dict);
  Expected<std::string> json = Error::Failure("");
  {
    py::gil_scoped_release unlocked;
    Expected<SimResult> r = Simulate(job, SimulateOptions{.record_timeline = false});
    json = r ? Expected<std::string>(ReportToJson(r->report)) : Expected<std::string>(r.error());
  }
  if (!json) Raise(json.error());
  // Through the JSON text, so that the dict holds exactly what `--report` writes.
  return ToPython(nlohmann::ordered_json::parse(*json));
}

std::vector<std::vector<std::string>> ScheduleOf(const py::dict& job_dict,
                                                 const std::string& format) {
  if (format != "compute_only" && format != "compute_comms" && format != "pipetwin") {
    throw py::value_error("format: must be compute_only, compute_comms or pipetwin, got '" +
                          format + "'");
  }
  const CsvFormat f = format == "compute_only"    ? CsvFormat::kComputeOnly
                      : format == "compute_comms" ? CsvFormat::kComputeComms
                                                  : CsvFormat::kPipetwin;
  const ResolvedJob job = Resolve(job_dict);
  std::vector<std::vector<std::string>> out;
  for (const auto& program : ScheduleForCsv(job.schedule, f).programs) {
    auto& row = out.emplace_back();
    for (const Action& a : program) {
      row.push_back(a.ToString());
    }
  }
  return out;
}

// plan(plan) -> dict: the plan file's keys (a job plus `search:`) as a dict; the result is what
// `pipetwin plan --report` writes. `top` and `threads` as the CLI's --top and --threads.
py::object PlanJob(const py::dict& plan_dict, int top, int threads) {
  // The CLI's bounds (apps/cmd_plan.cc): the same call gets the same answer either way.
  if (top < 1 || top > 100000) {
    throw py::value_error("top: must be an integer in [1, 100000], got " + std::to_string(top));
  }
  if (threads < 0 || threads > 1024) {
    throw py::value_error("threads: must be an integer in [0, 1024] (0: every core), got " +
                          std::to_string(threads));
  }
  const std::string yaml = JobYaml(plan_dict);
  Expected<std::string> json = Error::Failure("");
  {
    py::gil_scoped_release unlocked;
    auto plan = ParsePlanFile(yaml, kDictPath);
    if (!plan) {
      json = plan.error();
    } else {
      auto r = RunPlan(*plan, PlanOptions{.top = top, .threads = threads});
      json = r ? Expected<std::string>(PlanToJson(*r)) : Expected<std::string>(r.error());
    }
  }
  if (!json) Raise(json.error());
  return ToPython(nlohmann::ordered_json::parse(*json));
}

}  // namespace
}  // namespace pipetwin

PYBIND11_MODULE(pipetwin, m) {
  m.doc() = "pipetwin: simulate pipeline-parallel training steps (the CLI's libraries)";
  m.attr("__version__") = PIPETWIN_VERSION;
  m.def("simulate", &pipetwin::SimulateJob, py::arg("job"),
        "Predict one training step of a job (a dict with the job file's keys); returns the "
        "report, as `pipetwin simulate --report` writes it. Bad input raises ValueError.");
  m.def("schedule", &pipetwin::ScheduleOf, py::arg("job"), py::kw_only(),
        py::arg("format") = "compute_comms",
        "The lowered per-rank programs: one list of action strings per rank ('0F0', "
        "'1SEND_F2') as torch's runtime runs them; format='compute_only' keeps F, B, I, W "
        "only, format='pipetwin' every action of pipetwin's IR (OPT too).");
  m.def("plan", &pipetwin::PlanJob, py::arg("plan"), py::kw_only(), py::arg("top") = 10,
        py::arg("threads") = 0,
        "The best layouts for a plan (a dict with a job's keys and `search:`); returns what "
        "`pipetwin plan --report` writes. Bad input raises ValueError.");
}
