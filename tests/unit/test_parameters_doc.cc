// docs/parameters.md cannot drift from the public headers: every field of the structs it covers
// and every argument of AttentionImpl::forward has exactly one row, every row names one of them,
// and every row says per backend whether it is honoured, refused or n.a. The headers and the
// document are read from the source tree (PAGEDATTN_SOURCE_DIR, set by tests/cli.cmake).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace pagedattn {
namespace {

std::string read_source(const std::string& relative) {
  std::ifstream in(std::string(PAGEDATTN_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << "cannot read " << relative;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text without // comments.
std::string strip_comments(const std::string& text) {
  return std::regex_replace(text, std::regex("//[^\n]*"), "");
}

// From text[open] == '{', the index of the matching '}'.
size_t matching_brace(const std::string& text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    depth += text[i] == '{' ? 1 : text[i] == '}' ? -1 : 0;
    if (depth == 0) return i;
  }
  return std::string::npos;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n");
  const size_t e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The last identifier of a declaration ("const TensorView& query" -> "query").
std::string declared_name(const std::string& declaration) {
  std::smatch m;
  const std::string d = trim(declaration.substr(0, declaration.find('=')));
  return std::regex_search(d, m, std::regex("([A-Za-z_][A-Za-z0-9_]*)\\s*$")) ? m[1].str() : "";
}

// The data members of `struct name { ... };` in order: declarations ending in ';' at the struct's
// own level that are not functions (a '(' before any '='), static members or aliases.
std::vector<std::string> struct_fields(const std::string& header, const std::string& name) {
  const std::string text = strip_comments(header);
  const size_t at = text.find("struct " + name + " {");
  EXPECT_NE(at, std::string::npos) << "struct " << name << " not found";
  if (at == std::string::npos) return {};
  const size_t open = text.find('{', at);
  const size_t close = matching_brace(text, open);
  std::vector<std::string> fields;
  std::string statement;
  for (size_t i = open + 1; i < close; ++i) {
    const char c = text[i];
    if (c == '{') {  // a function body (skipped with its declaration) or a brace initializer
      const size_t end = matching_brace(text, i);
      const bool function = statement.substr(0, statement.find('=')).find('(') != std::string::npos;
      if (function) statement.clear();
      i = end;
      continue;
    }
    if (c != ';') {
      statement += c;
      continue;
    }
    const std::string s = trim(statement);
    statement.clear();
    const bool function = s.substr(0, s.find('=')).find('(') != std::string::npos;
    if (s.empty() || function || s.rfind("static", 0) == 0 || s.rfind("using", 0) == 0 ||
        s.rfind("friend", 0) == 0) {
      continue;
    }
    fields.push_back(declared_name(s));
  }
  return fields;
}

// The parameter names of `Status <function>(...)` in the header.
std::vector<std::string> function_arguments(const std::string& header,
                                            const std::string& function) {
  const std::string text = strip_comments(header);
  const size_t at = text.find("Status " + function + "(");
  EXPECT_NE(at, std::string::npos) << function << " not found";
  if (at == std::string::npos) return {};
  const size_t open = text.find('(', at);
  std::vector<std::string> names;
  std::string parameter;
  int depth = 0;
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    depth += c == '(' || c == '<' ? 1 : c == ')' || c == '>' ? -1 : 0;
    if (depth < 0 || (depth == 0 && c == ',')) {
      names.push_back(declared_name(parameter));
      parameter.clear();
      if (depth < 0) break;
      continue;
    }
    parameter += c;
  }
  return names;
}

struct Row {
  std::string name;
  std::vector<std::string> cells;
};

// The table rows of section `## heading` of the document: `| `name` | cell | cell | ... |`.
std::vector<Row> section_rows(const std::string& doc, const std::string& heading) {
  const size_t at = doc.find("\n## " + heading + "\n");
  EXPECT_NE(at, std::string::npos) << "docs/parameters.md has no section '## " << heading << "'";
  if (at == std::string::npos) return {};
  const size_t end = doc.find("\n## ", at + 1);
  std::istringstream lines(doc.substr(at, end == std::string::npos ? std::string::npos : end - at));
  std::vector<Row> rows;
  const std::regex row_start("^\\| `([A-Za-z0-9_]+)` \\|");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row_start)) continue;
    Row row{m[1].str(), {}};
    std::stringstream cells(line.substr(1));
    for (std::string cell; std::getline(cells, cell, '|');) row.cells.push_back(trim(cell));
    rows.push_back(row);
  }
  return rows;
}

// Columns: name, home, CPU_ATTN, FLASH_ATTN, FLASHINFER.
void expect_documented(const std::string& heading, const std::vector<std::string>& names) {
  const std::vector<Row> rows = section_rows(read_source("docs/parameters.md"), heading);
  std::map<std::string, int> seen;
  for (const Row& row : rows) {
    ++seen[row.name];
    EXPECT_NE(std::find(names.begin(), names.end(), row.name), names.end())
        << heading << ": docs/parameters.md has a row for `" << row.name
        << "`, which the header does not declare";
    ASSERT_EQ(row.cells.size(), 5u) << heading << " `" << row.name << "`: expected 5 columns";
    EXPECT_FALSE(row.cells[1].empty()) << heading << " `" << row.name << "`: no home";
    for (size_t c = 2; c < 5; ++c) {
      const std::string& cell = row.cells[c];
      EXPECT_TRUE(cell.rfind("honoured", 0) == 0 || cell.rfind("refused", 0) == 0 ||
                  cell.rfind("n.a.", 0) == 0)
          << heading << " `" << row.name << "` column " << c
          << " starts with neither honoured, refused nor n.a.: " << cell;
    }
  }
  for (const std::string& name : names) {
    EXPECT_EQ(seen[name], 1) << heading << ": `" << name
                             << "` needs exactly one row in docs/parameters.md";
  }
}

TEST(ParametersDoc, ParsesTheHeaders) {
  const std::string backend = read_source("include/pagedattn/backend.h");
  EXPECT_EQ(struct_fields(backend, "BuilderParams").front(), "num_heads");
  EXPECT_EQ(struct_fields(backend, "AttentionImplParams").back(), "fp8_tensor_cores");
  EXPECT_EQ(function_arguments(backend, "forward"),
            (std::vector<std::string>{"query", "key", "value", "kv_cache", "metadata", "output",
                                      "output_lse", "scales", "stream"}));
}

TEST(ParametersDoc, EveryPublicFieldHasItsRow) {
  const std::string backend = read_source("include/pagedattn/backend.h");
  const std::string metadata = read_source("include/pagedattn/metadata.h");
  for (const char* name : {"AttentionSelectorConfig", "AttentionImplParams", "BuilderParams"}) {
    expect_documented(name, struct_fields(backend, name));
  }
  expect_documented("CommonAttentionMetadata", struct_fields(metadata, "CommonAttentionMetadata"));
  expect_documented("forward", function_arguments(backend, "forward"));
}

}  // namespace
}  // namespace pagedattn
