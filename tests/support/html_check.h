// A small strict checker for the HTML the report writer emits: tags balance,
// attribute values are double-quoted, text holds no raw '<' or '>', every '&'
// starts a character reference, <style> holds no '<'. Not a general HTML
// parser: it accepts the subset the writer produces and rejects the rest.
#pragma once

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu::test {

struct HtmlCheck {
  bool ok = true;
  std::string error;                  // first problem found
  std::map<std::string, int> opened;  // element name -> count
};

inline bool valid_reference(std::string_view s, std::size_t amp) {
  std::size_t i = amp + 1;
  if (i < s.size() && s[i] == '#') {
    ++i;
    bool hex = i < s.size() && (s[i] == 'x' || s[i] == 'X');
    if (hex) ++i;
    std::size_t d = i;
    while (i < s.size() &&
           (hex ? std::isxdigit(static_cast<unsigned char>(s[i])) : std::isdigit(static_cast<unsigned char>(s[i]))))
      ++i;
    return i > d && i < s.size() && s[i] == ';';
  }
  std::size_t d = i;
  while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
  return i > d && i < s.size() && s[i] == ';';
}

inline HtmlCheck check_html(std::string_view s) {
  static const std::set<std::string> kVoid = {"meta", "link", "br", "hr", "img", "input", "col", "wbr"};
  HtmlCheck r;
  auto fail = [&](std::size_t at, const std::string& why) {
    if (r.ok) {
      r.ok = false;
      std::size_t from = at > 60 ? at - 60 : 0;
      r.error = why + " at offset " + std::to_string(at) + " near: " + std::string(s.substr(from, 120));
    }
  };
  std::vector<std::string> stack;
  const std::string_view doctype = "<!DOCTYPE html>";
  if (s.substr(0, doctype.size()) != doctype) fail(0, "no <!DOCTYPE html> first");
  std::size_t i = 0;
  while (i < s.size() && r.ok) {
    char ch = s[i];
    if (ch == '&') {
      if (!valid_reference(s, i)) fail(i, "bare '&' in text");
      ++i;
      continue;
    }
    if (ch == '>') {
      fail(i, "raw '>' in text");
      break;
    }
    if (ch != '<') {
      ++i;
      continue;
    }
    if (s.substr(i, 4) == "<!--") {
      std::size_t e = s.find("-->", i + 4);
      if (e == std::string_view::npos) fail(i, "unterminated comment");
      i = e + 3;
      continue;
    }
    if (s.substr(i, 2) == "<!") {
      if (i != 0) fail(i, "declaration other than the leading doctype");
      i = s.find('>', i) + 1;
      continue;
    }
    bool closing = s.substr(i, 2) == "</";
    std::size_t j = i + (closing ? 2 : 1);
    std::size_t n0 = j;
    while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-')) ++j;
    std::string name(s.substr(n0, j - n0));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) {
      fail(i, "raw '<' in text");
      break;
    }
    if (closing) {
      if (j >= s.size() || s[j] != '>') {
        fail(i, "malformed end tag");
        break;
      }
      if (stack.empty() || stack.back() != name) {
        fail(i, "end tag </" + name + "> does not match " +
                    (stack.empty() ? std::string("nothing") : "<" + stack.back() + ">"));
        break;
      }
      stack.pop_back();
      i = j + 1;
      continue;
    }
    // Attributes: name or name="value".
    bool self_closing = false;
    while (true) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size()) {
        fail(i, "unterminated tag");
        break;
      }
      if (s[j] == '>') {
        ++j;
        break;
      }
      if (s.substr(j, 2) == "/>") {
        self_closing = true;
        j += 2;
        break;
      }
      std::size_t a0 = j;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])) && s[j] != '=' && s[j] != '>' &&
             s[j] != '/' && s[j] != '"' && s[j] != '\'' && s[j] != '<')
        ++j;
      if (j == a0) {
        fail(j, "bad character in tag <" + name + ">");
        break;
      }
      if (j < s.size() && s[j] == '=') {
        ++j;
        if (j >= s.size() || s[j] != '"') {
          fail(j, "unquoted attribute value in <" + name + ">");
          break;
        }
        std::size_t e = s.find('"', j + 1);
        if (e == std::string_view::npos) {
          fail(j, "unterminated attribute value");
          break;
        }
        for (std::size_t k = j + 1; k < e; ++k) {
          if (s[k] == '<') fail(k, "raw '<' in attribute value");
          if (s[k] == '&' && !valid_reference(s, k)) fail(k, "bare '&' in attribute value");
        }
        j = e + 1;
      }
    }
    if (!r.ok) break;
    ++r.opened[name];
    i = j;
    if (name == "script") fail(i, "<script> element");
    if (name == "style" && !self_closing) {
      std::size_t e = s.find("</style>", i);
      if (e == std::string_view::npos) {
        fail(i, "unterminated <style>");
        break;
      }
      if (s.substr(i, e - i).find('<') != std::string_view::npos) fail(i, "'<' inside <style>");
      i = e + 8;
      continue;
    }
    if (!self_closing && !kVoid.count(name)) stack.push_back(name);
  }
  if (r.ok && !stack.empty()) fail(s.size(), "unclosed <" + stack.back() + ">");
  return r;
}

}  // namespace gpemu::test
