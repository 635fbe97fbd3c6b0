// yaml_util.h — internal helpers for reading job-file sections in models/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "schedule/expected.h"
#include "schedule/yaml_fields.h"

namespace pipetwin::models::internal {

// fields.At(node, ...) when the node has a position in the file, else "<file>: key: what"
// (an absent section has no position, and yaml-cpp throws when asked for one).
inline Error AtOrFile(const YamlFields& fields, const YAML::Node& node, std::string_view key,
                      std::string_view what) {
  if (node.IsDefined() && node.Mark().line >= 0) return fields.At(node, key, what);
  return Error::BadInput(fields.path() + ": " + std::string(key) + ": " + std::string(what));
}

}  // namespace pipetwin::models::internal
