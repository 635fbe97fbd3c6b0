#include "schedule/yaml_fields.h"

#include <cmath>
#include <sstream>

#include "schedule/quote.h"
#include "schedule/suggest.h"

namespace pipetwin {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += v[i];
  }
  return out;
}

std::string Shown(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return Quoted(node.Scalar());
  if (node.IsSequence()) return "a list";
  return "a mapping";
}

}  // namespace

Error YamlFields::At(const YAML::Node& node, std::string_view key, std::string_view what) const {
  std::ostringstream os;
  os << path_;
  if (node.IsDefined()) {
    const YAML::Mark m = node.Mark();
    if (m.line >= 0) os << ':' << (m.line + 1) << ':' << (m.column + 1);
  }
  os << ": " << key << ": " << what;
  return Error::BadInput(os.str());
}

Status YamlFields::CheckKeys(const YAML::Node& map, std::string_view section,
                             std::initializer_list<std::string_view> allowed) const {
  std::vector<std::string> v;
  for (auto a : allowed) v.emplace_back(a);
  return CheckKeys(map, section, v);
}

Status YamlFields::CheckKeys(const YAML::Node& map, std::string_view section,
                             const std::vector<std::string>& allowed) const {
  if (!map.IsDefined() || map.IsNull()) return OkStatus();
  if (!map.IsMap())
    return At(map, section, "must be a mapping of keys to values, got " + Shown(map));
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.Scalar();
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == key;
    if (!ok) {
      const std::string guess = DidYouMean(key, allowed);
      return At(it->first, section,
                "unknown key " + Quoted(key) + (guess.empty() ? "" : ", " + guess) +
                    " (allowed: " + Join(allowed) + ")");
    }
  }
  return OkStatus();
}

Expected<long long> YamlFields::Int(const YAML::Node& node, std::string_view key, long long min,
                                    long long max) const {
  const std::string range =
      "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got ";
  if (!node.IsScalar()) return At(node, key, range + Shown(node));
  const std::string& s = node.Scalar();
  std::size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &pos);
  } catch (...) {
    return At(node, key, range + Shown(node));
  }
  if (pos != s.size() || v < min || v > max) return At(node, key, range + Shown(node));
  return v;
}

Expected<double> YamlFields::Number(const YAML::Node& node, std::string_view key, double min,
                                    double max) const {
  std::ostringstream range;
  range << "must be a number in [" << min << ", " << max << "], got ";
  if (!node.IsScalar()) return At(node, key, range.str() + Shown(node));
  const std::string& s = node.Scalar();
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    return At(node, key, range.str() + Shown(node));
  }
  if (pos != s.size() || !std::isfinite(v) || v < min || v > max) {
    return At(node, key, range.str() + Shown(node));
  }
  return v;
}

Expected<bool> YamlFields::Bool(const YAML::Node& node, std::string_view key) const {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return At(node, key, "must be true or false, got " + Shown(node));
}

Expected<std::string> YamlFields::String(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar() || node.Scalar().empty()) {
    return At(node, key, "must be a non-empty string, got " + Shown(node));
  }
  return node.Scalar();
}

Expected<std::string> YamlFields::Choice(const YAML::Node& node, std::string_view key,
                                         const std::vector<std::string>& allowed) const {
  if (node.IsScalar()) {
    for (const auto& a : allowed) {
      if (a == node.Scalar()) return a;
    }
  }
  const std::string guess = node.IsScalar() ? DidYouMean(node.Scalar(), allowed) : "";
  return At(node, key,
            "must be one of " + Join(allowed) + ", got " + Shown(node) +
                (guess.empty() ? "" : "; " + guess));
}

}  // namespace pipetwin
