// doc_keys.h — for tests that keep a key reference in docs/ exact: the key paths a JSON
// document holds, and the key paths a Markdown reference names in its tables.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace pipetwin::testing {

// Every leaf's path: object keys joined by '.', an array as `[]` (its first element stands for
// all; an array of scalars is itself the leaf). An empty array adds nothing, so a documented
// key under it reads as never written until some input fills it.
inline void JsonKeyPaths(const nlohmann::json& j, const std::string& path,
                         std::set<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      JsonKeyPaths(value, path.empty() ? key : path + "." + key, out);
    }
  } else if (j.is_array()) {
    if (j.empty()) return;
    if (j.front().is_structured()) {
      JsonKeyPaths(j.front(), path + "[]", out);
    } else {
      out->insert(path + "[]");
    }
  } else {
    out->insert(path);
  }
}

// The text of docs/NAME under the source tree.
inline std::string ReadDoc(const std::string& name) {
  std::ifstream f(std::string(PIPETWIN_SOURCE_DIR) + "/docs/" + name);
  EXPECT_TRUE(f) << "docs/" << name;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The key paths named in backticks in the first column of a Markdown document's table rows:
// `a.b.c`, and the shorthand `.d` for a sibling of the path before it in the same cell (a.b.d).
inline std::set<std::string> DocumentedKeyPaths(const std::string& doc) {
  std::set<std::string> out;
  std::istringstream lines(doc);
  const std::regex tick("`([^`]*)`");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    std::string previous;
    for (std::sregex_iterator it(cell.begin(), cell.end(), tick), end; it != end; ++it) {
      std::string p = (*it)[1].str();
      if (!p.empty() && p[0] == '.') {
        const std::size_t dot = previous.rfind('.');
        EXPECT_NE(dot, std::string::npos) << "shorthand " << p << " with nothing before it";
        p = previous.substr(0, dot) + p;
      }
      out.insert(p);
      previous = p;
    }
  }
  return out;
}

}  // namespace pipetwin::testing
