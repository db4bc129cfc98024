// text.h — text opscope prints that came from elsewhere: made safe for a terminal, or quoted for a shell;
// and text it reads (a list item, trimmed).
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opscope {

// s without the whitespace at its ends (an item of a variable's comma-separated list).
inline std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// The items of a comma-separated value, trimmed, empty ones left out ("a, b,,c" -> a, b, c).
inline std::vector<std::string> listItems(std::string_view value) {
  std::vector<std::string> items;
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    if (std::string item = trim(value.substr(0, comma)); !item.empty()) items.push_back(std::move(item));
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
  }
  return items;
}

// An item "KEY:VALUE" split at its first colon, both trimmed (VALUE "" when there is no colon).
inline std::pair<std::string, std::string> keyValue(std::string_view item) {
  const std::size_t colon = item.find(':');
  return {trim(item.substr(0, colon)), colon == std::string_view::npos ? "" : trim(item.substr(colon + 1))};
}

// Text read back from a file someone else may have written, made safe to print on a terminal: each control
// character (escape sequences, newlines) becomes '?'.
inline std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

// s as one word of a POSIX shell command line: as it is when it holds only safe characters, else in single
// quotes.
inline std::string shellQuote(std::string_view s) {
  if (!s.empty() &&
      s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:=,") ==
          std::string_view::npos) {
    return std::string(s);
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A program's name as the text of a quoted CSV field ("…"): a quote becomes an apostrophe, a line break a
// space, so that the row stays one row of the same columns.
inline std::string csvQuoted(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '"') c = '\'';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

// A site as one line: "layer1.0.conv1 (backward of aten::convolution) at train.py:57 in train_step"; ""
// when all three are empty.
inline std::string siteText(std::string_view module, std::string_view source, std::string_view forward_op) {
  std::string text(module);
  if (!forward_op.empty()) {
    if (!text.empty()) text += ' ';
    text += "(backward of ";
    text += forward_op;
    text += ')';
  }
  if (!source.empty()) {
    if (!text.empty()) text += " at ";
    text += source;
  }
  return text;
}

// Text made safe inside HTML elements and attribute values.
inline std::string escapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace opscope
