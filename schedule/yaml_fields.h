// yaml_fields.h — typed, range-checked reads from a YAML job file, with errors that name
// the file, the line, the key and what is allowed.
//
//   YamlFields f{"job.yaml"};
//   Expected<int> pp = f.Int(node["parallel"], "parallel.pp", 1, 4096);
//   // error text: "job.yaml:3:15: parallel.pp: must be an integer in [1, 4096], got 0"
//   Status s = f.CheckKeys(node["parallel"], "parallel", {"pp", "vpp", "dp"});
//   // error text: "job.yaml:3:1: parallel: unknown key 'ppp' (allowed: pp, vpp, dp)"
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/expected.h"

namespace pipetwin {

class YamlFields {
 public:
  explicit YamlFields(std::string path) : path_(std::move(path)) {}

  const std::string& path() const { return path_; }

  // "<path>:<line>:<col>: <key>: <what>" (the position where the node has one).
  Error At(const YAML::Node& node, std::string_view key, std::string_view what) const;

  // Every key of `map` must be in `allowed`; `map` must be a mapping (or absent).
  Status CheckKeys(const YAML::Node& map, std::string_view section,
                   std::initializer_list<std::string_view> allowed) const;
  Status CheckKeys(const YAML::Node& map, std::string_view section,
                   const std::vector<std::string>& allowed) const;

  Expected<long long> Int(const YAML::Node& node, std::string_view key, long long min,
                          long long max) const;
  // Finite number in [min, max].
  Expected<double> Number(const YAML::Node& node, std::string_view key, double min,
                          double max) const;
  Expected<bool> Bool(const YAML::Node& node, std::string_view key) const;
  Expected<std::string> String(const YAML::Node& node, std::string_view key) const;
  // A string that must be one of `allowed`.
  Expected<std::string> Choice(const YAML::Node& node, std::string_view key,
                               const std::vector<std::string>& allowed) const;

 private:
  std::string path_;
};

}  // namespace pipetwin
