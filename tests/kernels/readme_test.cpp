// Each kernels/<op>/README.md's version table against the code, so the docs cannot drift from
// what is built. The convention (kernels/README.md): a README that documents versions has a
// heading "## Versions" ("## Algorithms" for convolution) followed by a markdown table whose first
// column holds each version's name in backticks. The code's names come from a runtime list where
// the op has one (a registry or ladder list), else from the enumerators of every
// `enum class ...Version` in the folder's headers, read as text: `best` and aliases
// (`x = other`) are left out, numbering (`naive = 1`) is allowed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/build_config.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/gemm/ladder/gemm_ladder.h"

namespace crema::kernels {
namespace {

namespace fs = std::filesystem;
using Names = std::set<std::string>;

const fs::path kKernels = fs::path(CREMA_SOURCE_DIR) / "kernels";

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// C++ source without its // and /* */ comments (string literals hold no comment markers in
// enum declarations, so they need no care).
std::string without_comments(const std::string& source) {
  std::string out;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source.compare(i, 2, "//") == 0) {
      i = source.find('\n', i);
      if (i == std::string::npos) break;
      out += '\n';
    } else if (source.compare(i, 2, "/*") == 0) {
      i = source.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
    } else {
      out += source[i];
    }
  }
  return out;
}

// The enumerators of every `enum class <Name>Version { ... }` in `source`, without `best` and
// without aliases (an enumerator set to another's name rather than to a number).
Names enum_versions(const std::string& source) {
  static const std::regex enum_re(R"(enum\s+class\s+\w*Version\s*(?::\s*[\w:]+\s*)?\{([^}]*)\})");
  static const std::regex item_re(R"(^\s*(\w+)\s*(?:=\s*(\S.*?))?\s*$)");
  const std::string text = without_comments(source);
  Names names;
  for (std::sregex_iterator m(text.begin(), text.end(), enum_re), end; m != end; ++m) {
    std::stringstream items((*m)[1].str());
    std::string item;
    while (std::getline(items, item, ',')) {
      std::smatch parts;
      if (!std::regex_match(item, parts, item_re)) continue;  // the blank after a last comma
      const std::string value = parts[2].str();
      const bool alias = !value.empty() && !std::isdigit(static_cast<unsigned char>(value[0]));
      if (parts[1] != "best" && !alias) names.insert(parts[1]);
    }
  }
  return names;
}

// The functions declared inside the `namespace cuda { ... }` blocks of `source`, as
// "cuda::name": an op with a single CUDA implementation has no version enum, and its README's
// table names those functions instead.
Names cuda_functions(const std::string& source) {
  static const std::regex call_re(R"((\w+)\s*\()");
  const std::string text = without_comments(source);
  Names names;
  for (size_t at = text.find("namespace cuda {"); at != std::string::npos;
       at = text.find("namespace cuda {", at + 1)) {
    size_t end = at + std::string("namespace cuda {").size();
    for (int depth = 1; end < text.size() && depth > 0; ++end) {
      depth += text[end] == '{' ? 1 : text[end] == '}' ? -1 : 0;
    }
    const std::string block = text.substr(at, end - at);
    for (std::sregex_iterator m(block.begin(), block.end(), call_re), stop; m != stop; ++m) {
      names.insert("cuda::" + (*m)[1].str());
    }
  }
  return names;
}

// The names in the first column of the first table under `heading` ("## Versions"): the first
// `name` in backticks of each body row. nullopt when the README has no such table. A body row
// without a name in backticks is reported as "no name in backticks: <the row>" so the comparison
// shows it.
std::optional<Names> readme_versions(const std::string& readme, const std::string& heading) {
  std::stringstream lines(readme);
  std::string line;
  bool in_section = false;
  int table_rows = 0;  // header, separator, then the body
  Names names;
  while (std::getline(lines, line)) {
    const bool table_row = !line.empty() && line[0] == '|';
    if (!in_section) {
      in_section = line == heading;
      continue;
    }
    if (table_rows > 0 && !table_row) break;  // the first table has ended
    if (line.rfind("## ", 0) == 0) break;     // the section has ended
    if (!table_row) continue;
    if (++table_rows <= 2) continue;
    const std::string first_cell = line.substr(1, line.find('|', 1) - 1);
    const size_t open = first_cell.find('`');
    const size_t close = open == std::string::npos ? open : first_cell.find('`', open + 1);
    if (close == std::string::npos) {
      names.insert("no name in backticks: " + line);
    } else {
      names.insert(first_cell.substr(open + 1, close - open - 1));
    }
  }
  if (table_rows == 0) return std::nullopt;
  return names;
}

// Ops whose versions are a list at runtime rather than an enum: the convolution's registry (every
// record of its ladder, production's and the ladder's own) and the GEMM ladder's rungs.
const std::map<std::string, std::function<Names()>>& runtime_versions() {
  static const std::map<std::string, std::function<Names()>> lists = {
      {"gemm",
       [] {
         Names names;
         for (cuda::ladder::Rung r : cuda::ladder::rungs()) names.insert(cuda::ladder::name(r));
         return names;
       }},
      {"convolution",
       [] {
         Names names;
         for (const ConvAlgorithm* a : conv_ladder()) names.insert(a->name);
         return names;
       }},
  };
  return lists;
}

std::string heading_of(const std::string& op) {
  return op == "convolution" ? "## Algorithms" : "## Versions";
}

// The code's version names of kernels/<op>/: its runtime list, else its headers' enums.
Names code_versions(const std::string& op) {
  const auto list = runtime_versions().find(op);
  if (list != runtime_versions().end()) return list->second();
  Names names;
  for (const auto& entry : fs::recursive_directory_iterator(kKernels / op)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".h" || ext == ".cuh") names.merge(enum_versions(read_text(entry.path())));
  }
  return names;
}

std::string joined(const Names& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "`" : ", `") + name + "`";
  return out.empty() ? "(none)" : out;
}

// "" when the README's table and the code agree; else what is wrong, naming the README and the
// names missing from either side.
std::string disagreement(const std::string& readme_name, const std::optional<Names>& table,
                         const std::string& heading, const Names& code) {
  if (!table) {
    if (code.empty()) return "";
    return readme_name + " has no table under \"" + heading + "\" but the code has versions " +
           joined(code);
  }
  Names missing, extra;
  for (const std::string& name : code) {
    if (table->count(name) == 0) missing.insert(name);
  }
  for (const std::string& name : *table) {
    if (code.count(name) == 0) extra.insert(name);
  }
  if (missing.empty() && extra.empty()) return "";
  return readme_name + " \"" + heading + "\" table: missing " + joined(missing) +
         " (in the code); extra " + joined(extra) + " (not in the code)";
}

// --- the parser itself, on an inline README and header -------------------------------------

const char* kHeader = R"(
enum class TinyMode { fast, slow };  // not a ...Version enum
enum class TinyVersion {
  naive = 1,  // v1: one thread per element, a comment with = and , in it
  tiled,      /* v2: shared memory */
  best = tiled,
  latest = tiled,
};
enum class OtherVersion : int { scalar, vectorized, best = vectorized };
)";

const char* kReadme = R"(# tiny
## Versions

Prose before the table.

| version | what it changes |
| --- | --- |
| `naive` (v1) | one thread per element |
| v2 `tiled` | shared memory |
| `scalar` | one element per thread |
| `vectorized` | float4 |

| shape | µs |
| --- | --- |
| 1024 | 3 |

## Measured
| `not_a_version` | |
)";

TEST(ReadmeVersions, ReadsTheEnumsOfAHeader) {
  EXPECT_EQ(enum_versions(kHeader), (Names{"naive", "tiled", "scalar", "vectorized"}));
  EXPECT_EQ(enum_versions("enum class ConvVersion;  // below\n"), Names{});
}

TEST(ReadmeVersions, ReadsTheFirstTableOfTheSection) {
  EXPECT_EQ(readme_versions(kReadme, "## Versions"),
            (Names{"naive", "tiled", "scalar", "vectorized"}));
  EXPECT_EQ(readme_versions(kReadme, "## Algorithms"), std::nullopt);
  EXPECT_EQ(readme_versions("## Versions\n\nProse only.\n## Next\n| `x` |\n", "## Versions"),
            std::nullopt);
  EXPECT_EQ(readme_versions("## Versions\n| a |\n| - |\n| no name |\n", "## Versions"),
            Names{"no name in backticks: | no name |"});
}

TEST(ReadmeVersions, NamesWhatDisagrees) {
  const Names code = enum_versions(kHeader);
  EXPECT_EQ(
      disagreement("tiny/README.md", readme_versions(kReadme, "## Versions"), "## Versions", code),
      "");
  const std::string drift = disagreement(
      "tiny/README.md", Names{"naive", "tiled", "scalar", "warp"}, "## Versions", code);
  EXPECT_EQ(drift,
            "tiny/README.md \"## Versions\" table: missing `vectorized` (in the code); extra "
            "`warp` (not in the code)");
  EXPECT_EQ(disagreement("tiny/README.md", std::nullopt, "## Versions", code),
            "tiny/README.md has no table under \"## Versions\" but the code has versions "
            "`naive`, `scalar`, `tiled`, `vectorized`");
  EXPECT_NE(disagreement("tiny/README.md", Names{"naive"}, "## Versions", Names{}), "");
  EXPECT_EQ(disagreement("tiny/README.md", std::nullopt, "## Versions", Names{}), "");
}

// --- every op folder --------------------------------------------------------------------------

std::vector<std::string> op_folders() {
  std::vector<std::string> ops;
  for (const auto& entry : fs::directory_iterator(kKernels)) {
    if (entry.is_directory()) ops.push_back(entry.path().filename().string());
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

class ReadmeVersionTable : public ::testing::TestWithParam<std::string> {};

TEST_P(ReadmeVersionTable, AgreesWithTheCode) {
  const std::string op = GetParam();
  if (op == "convolution" && !kBuiltWithCuda) {
    GTEST_SKIP() << "a build without CUDA has no convolution records to compare with";
  }
  const fs::path readme = kKernels / op / "README.md";
  const std::string heading = heading_of(op);
  const std::optional<Names> table =
      fs::exists(readme) ? readme_versions(read_text(readme), heading) : std::nullopt;
  Names code = code_versions(op);
  if (code.empty() && table) {
    // One CUDA implementation, no enum: every `cuda::name` the table lists must be declared.
    Names declared;
    for (const auto& entry : fs::recursive_directory_iterator(kKernels / op)) {
      if (entry.path().extension() == ".h") declared.merge(cuda_functions(read_text(entry.path())));
    }
    for (const std::string& name : *table) {
      if (declared.count(name)) code.insert(name);
    }
  }
  EXPECT_EQ(disagreement("kernels/" + op + "/README.md", table, heading, code), "");
}

TEST(ReadmeVersions, ReadsTheCudaFunctionsOfAHeader) {
  const char* header = R"(
void outside(int x);
namespace cuda {
// not_a_function(  in a comment
void accuracy(const float* x, int n);
struct Plan { int blocks() const; };
}  // namespace cuda
)";
  EXPECT_EQ(cuda_functions(header), (Names{"cuda::accuracy", "cuda::blocks"}));
}

TEST(ReadmeVersions, SeesEveryOpFolder) {
  const std::vector<std::string> ops = op_folders();
  for (const char* op : {"convolution", "gemm", "lrn", "common"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  }
  EXPECT_FALSE(code_versions("lrn").empty());
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReadmeVersionTable, ::testing::ValuesIn(op_folders()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace crema::kernels
