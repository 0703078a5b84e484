#include "sim/kube/selector.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "base/strings.h"
#include "kube/names.h"

namespace gpuop::simkube {

using nlohmann::json;

namespace {

// --- Label selector lexer (the real one's token set) ---

enum class Tok {
  kEnd,
  kIdentifier,
  kIn,
  kNotIn,
  kNot,           // !
  kNotEquals,     // !=
  kEquals,        // =
  kDoubleEquals,  // ==
  kGreater,       // >
  kLess,          // <
  kOpenParen,
  kCloseParen,
  kComma,
  kError,
};

bool IsSpecial(char c) {
  return c == '!' || c == '=' || c == '>' || c == '<' || c == '(' || c == ')' || c == ',';
}
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  std::pair<Tok, std::string> Lex() {
    while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
    if (pos_ >= s_.size()) return {Tok::kEnd, ""};
    char c = s_[pos_];
    if (IsSpecial(c)) {
      // Longest special-symbol match: "!=", "==" before "!", "=".
      if (pos_ + 1 < s_.size()) {
        std::string_view two = s_.substr(pos_, 2);
        if (two == "!=") {
          pos_ += 2;
          return {Tok::kNotEquals, "!="};
        }
        if (two == "==") {
          pos_ += 2;
          return {Tok::kDoubleEquals, "=="};
        }
      }
      ++pos_;
      switch (c) {
        case '!':
          return {Tok::kNot, "!"};
        case '=':
          return {Tok::kEquals, "="};
        case '>':
          return {Tok::kGreater, ">"};
        case '<':
          return {Tok::kLess, "<"};
        case '(':
          return {Tok::kOpenParen, "("};
        case ')':
          return {Tok::kCloseParen, ")"};
        case ',':
          return {Tok::kComma, ","};
        default:
          break;
      }
    }
    size_t start = pos_;
    while (pos_ < s_.size() && !IsSpace(s_[pos_]) && !IsSpecial(s_[pos_])) ++pos_;
    std::string word(s_.substr(start, pos_ - start));
    if (word == "in") return {Tok::kIn, word};
    if (word == "notin") return {Tok::kNotIn, word};
    return {Tok::kIdentifier, word};
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

// A token stream with one-token lookahead.
class Parser {
 public:
  explicit Parser(std::string_view s) : lexer_(s) {
    for (auto t = lexer_.Lex();; t = lexer_.Lex()) {
      toks_.push_back(t);
      if (t.first == Tok::kEnd) break;
    }
  }
  const std::pair<Tok, std::string>& Peek() const { return toks_[pos_]; }
  std::pair<Tok, std::string> Next() {
    auto t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }

 private:
  Lexer lexer_;
  std::vector<std::pair<Tok, std::string>> toks_;
  size_t pos_ = 0;
};

Status ParseError(std::string msg) {
  return InvalidArgument("unable to parse requirement: " + msg);
}

Status ValidateKey(const std::string& key) {
  std::string err = ValidateQualifiedName(key);
  if (!err.empty()) return ParseError("key: Invalid value: " + JsonQuote(key) + ": " + err);
  return Status::Ok();
}

Status ValidateValue(const std::string& value) {
  std::string err = ValidateLabelValue(value);
  if (!err.empty()) {
    return ParseError("values[0][" + std::string("value") +
                      "]: Invalid value: " + JsonQuote(value) + ": " + err);
  }
  return Status::Ok();
}

bool ParseInt64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

Result<LabelRequirement> ParseRequirement(Parser& p) {
  LabelRequirement req;
  auto tok = p.Next();
  bool negated = false;
  if (tok.first == Tok::kNot) {
    negated = true;
    tok = p.Next();
  }
  if (tok.first != Tok::kIdentifier) {
    return ParseError("found '" + tok.second + "', expected: identifier");
  }
  req.key = tok.second;
  GPUOP_RETURN_IF_ERROR(ValidateKey(req.key));
  Tok next = p.Peek().first;
  if (next == Tok::kEnd || next == Tok::kComma) {
    req.op = negated ? LabelRequirement::Op::kDoesNotExist : LabelRequirement::Op::kExists;
    return req;
  }
  if (negated) {
    return ParseError("found '" + p.Peek().second + "', expected: ',' or 'end of string'");
  }
  auto op = p.Next();
  switch (op.first) {
    case Tok::kEquals:
    case Tok::kDoubleEquals:
      req.op = LabelRequirement::Op::kEquals;
      break;
    case Tok::kNotEquals:
      req.op = LabelRequirement::Op::kNotEquals;
      break;
    case Tok::kIn:
      req.op = LabelRequirement::Op::kIn;
      break;
    case Tok::kNotIn:
      req.op = LabelRequirement::Op::kNotIn;
      break;
    case Tok::kGreater:
      req.op = LabelRequirement::Op::kGreaterThan;
      break;
    case Tok::kLess:
      req.op = LabelRequirement::Op::kLessThan;
      break;
    default:
      return ParseError("found '" + op.second + "', expected: in, notin, =, ==, !=, gt, lt");
  }
  if (req.op == LabelRequirement::Op::kIn || req.op == LabelRequirement::Op::kNotIn) {
    auto open = p.Next();
    if (open.first != Tok::kOpenParen) {
      return ParseError("found '" + open.second + "', expected: '('");
    }
    // Comma-separated identifiers; empty values are allowed ("a in (,x)").
    bool expect_value = true;
    while (true) {
      auto t = p.Next();
      if (t.first == Tok::kIdentifier && expect_value) {
        req.values.push_back(t.second);
        expect_value = false;
      } else if (t.first == Tok::kComma) {
        if (expect_value) req.values.push_back("");
        expect_value = true;
      } else if (t.first == Tok::kCloseParen) {
        if (expect_value && !req.values.empty()) req.values.push_back("");
        break;
      } else {
        return ParseError("found '" + t.second + "', expected: ',', ')' or identifier");
      }
    }
    if (req.values.empty()) {
      return ParseError("for 'in', 'notin' operators, values set can't be empty");
    }
  } else {
    const auto& t = p.Peek();
    if (t.first == Tok::kIdentifier) {
      req.values.push_back(p.Next().second);
    } else if (t.first == Tok::kEnd || t.first == Tok::kComma) {
      req.values.push_back("");  // "a=" selects an empty value
    } else {
      return ParseError("found '" + t.second + "', expected: identifier");
    }
    if (req.op == LabelRequirement::Op::kGreaterThan || req.op == LabelRequirement::Op::kLessThan) {
      int64_t v;
      if (!ParseInt64(req.values[0], &v)) {
        return ParseError("for 'Gt', 'Lt' operators, the value must be an integer");
      }
    }
  }
  if (req.op != LabelRequirement::Op::kGreaterThan && req.op != LabelRequirement::Op::kLessThan) {
    for (const auto& v : req.values) GPUOP_RETURN_IF_ERROR(ValidateValue(v));
  }
  std::sort(req.values.begin(), req.values.end());
  req.values.erase(std::unique(req.values.begin(), req.values.end()), req.values.end());
  return req;
}

const json* LabelOf(const json& labels, const std::string& key) {
  if (!labels.is_object()) return nullptr;
  auto it = labels.find(key);
  if (it == labels.end()) return nullptr;
  return &*it;
}

std::string ScalarString(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_null()) return "";
  return v.dump();
}

}  // namespace

std::string ValidateQualifiedName(std::string_view key) {
  return Join(kube::IsQualifiedName(key), "; ");
}

std::string ValidateLabelValue(std::string_view value) {
  return Join(kube::IsLabelValue(value), "; ");
}

// --- LabelRequirement / LabelSelector ---

bool LabelRequirement::Matches(const json& labels) const {
  const json* v = LabelOf(labels, key);
  auto in_values = [&](const json* lv) {
    if (lv == nullptr) return false;
    std::string s = ScalarString(*lv);
    return std::binary_search(values.begin(), values.end(), s);
  };
  switch (op) {
    case Op::kExists:
      return v != nullptr;
    case Op::kDoesNotExist:
      return v == nullptr;
    case Op::kEquals:
    case Op::kIn:
      return in_values(v);
    case Op::kNotEquals:
    case Op::kNotIn:
      return !in_values(v);
    case Op::kGreaterThan:
    case Op::kLessThan: {
      if (v == nullptr || values.empty()) return false;
      int64_t have, want;
      if (!ParseInt64(ScalarString(*v), &have) || !ParseInt64(values[0], &want)) return false;
      return op == Op::kGreaterThan ? have > want : have < want;
    }
  }
  return false;
}

std::string LabelRequirement::String() const {
  auto list = [&] {
    // The empty value alone: "()" does not parse (an empty set), "(,)" does.
    if (values.size() == 1 && values[0].empty()) return std::string("(,)");
    std::string s = "(";
    for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + values[i];
    return s + ")";
  };
  std::string one = values.empty() ? "" : values[0];
  switch (op) {
    case Op::kExists:
      return key;
    case Op::kDoesNotExist:
      return "!" + key;
    case Op::kEquals:
      return key + "=" + one;
    case Op::kNotEquals:
      return key + "!=" + one;
    case Op::kIn:
      return key + " in " + list();
    case Op::kNotIn:
      return key + " notin " + list();
    case Op::kGreaterThan:
      return key + ">" + one;
    case Op::kLessThan:
      return key + "<" + one;
  }
  return key;
}

Result<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  Parser p(text);
  if (p.Peek().first == Tok::kEnd) return sel;
  while (true) {
    auto req = ParseRequirement(p);
    if (!req.ok()) return req.status();
    sel.requirements_.push_back(std::move(req).value());
    auto t = p.Next();
    if (t.first == Tok::kEnd) break;
    if (t.first != Tok::kComma) {
      return ParseError("found '" + t.second + "', expected: ',' or 'end of string'");
    }
  }
  std::stable_sort(sel.requirements_.begin(), sel.requirements_.end(),
                   [](const auto& a, const auto& b) { return a.key < b.key; });
  return sel;
}

Result<LabelSelector> LabelSelector::FromJson(const json& selector) {
  LabelSelector sel;
  if (selector.is_null()) return sel;
  if (!selector.is_object()) return InvalidArgument("label selector must be an object");
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && !ml->is_null()) {
    if (!ml->is_object()) return InvalidArgument("matchLabels must be an object");
    for (const auto& [k, v] : ml->items()) {
      if (!v.is_string()) return InvalidArgument("matchLabels." + k + " must be a string");
      GPUOP_RETURN_IF_ERROR(ValidateKey(k));
      GPUOP_RETURN_IF_ERROR(ValidateValue(v.get<std::string>()));
      sel.requirements_.push_back({k, LabelRequirement::Op::kEquals, {v.get<std::string>()}});
    }
  }
  if (auto me = selector.find("matchExpressions"); me != selector.end() && !me->is_null()) {
    if (!me->is_array()) return InvalidArgument("matchExpressions must be an array");
    for (const auto& e : *me) {
      if (!e.is_object()) return InvalidArgument("matchExpressions items must be objects");
      LabelRequirement r;
      r.key = e.value("key", "");
      GPUOP_RETURN_IF_ERROR(ValidateKey(r.key));
      std::string op = e.value("operator", "");
      if (auto vs = e.find("values"); vs != e.end() && vs->is_array()) {
        for (const auto& v : *vs) {
          if (!v.is_string()) return InvalidArgument("matchExpressions values must be strings");
          r.values.push_back(v.get<std::string>());
        }
      }
      if (op == "In") {
        r.op = LabelRequirement::Op::kIn;
      } else if (op == "NotIn") {
        r.op = LabelRequirement::Op::kNotIn;
      } else if (op == "Exists") {
        r.op = LabelRequirement::Op::kExists;
      } else if (op == "DoesNotExist") {
        r.op = LabelRequirement::Op::kDoesNotExist;
      } else {
        return InvalidArgument(JsonQuote(op) + " is not a valid label selector operator");
      }
      bool set_op = r.op == LabelRequirement::Op::kIn || r.op == LabelRequirement::Op::kNotIn;
      if (set_op && r.values.empty()) {
        return InvalidArgument("for 'in', 'notin' operators, values set can't be empty");
      }
      if (!set_op && !r.values.empty()) {
        return InvalidArgument("values set must be empty for exists and does not exist");
      }
      std::sort(r.values.begin(), r.values.end());
      sel.requirements_.push_back(std::move(r));
    }
  }
  std::stable_sort(sel.requirements_.begin(), sel.requirements_.end(),
                   [](const auto& a, const auto& b) { return a.key < b.key; });
  return sel;
}

bool LabelSelector::Matches(const json& labels) const {
  for (const auto& r : requirements_) {
    if (!r.Matches(labels)) return false;
  }
  return true;
}

bool LabelSelector::MatchesObject(const json& obj) const {
  if (requirements_.empty()) return true;
  static const json kNull;
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return Matches(kNull);
  auto l = m->find("labels");
  return Matches(l == m->end() ? kNull : *l);
}

std::string LabelSelector::String() const {
  std::string s;
  for (size_t i = 0; i < requirements_.size(); ++i) {
    if (i) s += ",";
    s += requirements_[i].String();
  }
  return s;
}

// --- FieldSelector ---

namespace {

// Splits on unescaped commas, keeping escapes for the term parser.
std::vector<std::string> SplitTerms(std::string_view s) {
  std::vector<std::string> terms;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      cur += s[i];
      cur += s[++i];
    } else if (s[i] == ',') {
      terms.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  terms.push_back(std::move(cur));
  return terms;
}

Result<std::string> Unescape(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    char c = v[i];
    if (c == '\\') {
      if (i + 1 >= v.size())
        return InvalidArgument("invalid field selector: invalid escape sequence");
      char n = v[++i];
      if (n != '\\' && n != ',' && n != '=' && n != '!') {
        return InvalidArgument("invalid field selector: invalid escape sequence");
      }
      out += n;
    } else if (c == '=' || c == ',' || c == '!') {
      return InvalidArgument(std::string("invalid field selector: unescaped ") + c + " in value");
    } else {
      out += c;
    }
  }
  return out;
}

std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == ',' || c == '=' || c == '!') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

Result<FieldSelector> FieldSelector::Parse(std::string_view text) {
  FieldSelector sel;
  if (Trim(text).empty()) return sel;
  for (const std::string& term : SplitTerms(text)) {
    if (term.empty()) continue;
    // The first operator position; at that position "!=" and "==" beat "=".
    size_t pos = std::string::npos;
    size_t op_len = 0;
    bool equals = true;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term[i] == '\\') {
        ++i;
        continue;
      }
      if (term.compare(i, 2, "!=") == 0) {
        pos = i;
        op_len = 2;
        equals = false;
        break;
      }
      if (term.compare(i, 2, "==") == 0) {
        pos = i;
        op_len = 2;
        break;
      }
      if (term[i] == '=') {
        pos = i;
        op_len = 1;
        break;
      }
    }
    // A field of blanks is no field either (" =x" like "=x"); one ending in
    // '!' or '\\' ("a! =x") would read back from String() as another
    // selector ("a!=x") or none ("a\\=x").
    std::string_view field =
        pos == std::string::npos ? "" : Trim(std::string_view(term).substr(0, pos));
    if (field.empty() || field.back() == '!' || field.back() == '\\') {
      return InvalidArgument("invalid selector: '" + std::string(text) + "'; can't understand '" +
                             term + "'");
    }
    FieldRequirement r;
    r.field = std::string(field);
    r.equals = equals;
    auto v = Unescape(std::string_view(term).substr(pos + op_len));
    if (!v.ok()) return v.status();
    r.value = std::move(v).value();
    sel.requirements_.push_back(std::move(r));
  }
  return sel;
}

std::string FieldSelector::FieldValue(const json& obj, std::string_view field) {
  const json* cur = &obj;
  size_t start = 0;
  while (true) {
    size_t dot = field.find('.', start);
    std::string part(field.substr(start, dot == std::string_view::npos ? field.npos : dot - start));
    if (!cur->is_object()) return "";
    auto it = cur->find(part);
    if (it == cur->end()) return "";
    cur = &*it;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (cur->is_array()) {
    // status.podIPs and the like: the first entry's "ip", or the first scalar.
    if (cur->empty()) return "";
    const json& first = cur->front();
    if (first.is_object()) return first.contains("ip") ? ScalarString(first["ip"]) : "";
    return ScalarString(first);
  }
  if (cur->is_object()) return "";
  return ScalarString(*cur);
}

bool FieldSelector::Matches(const json& obj) const {
  for (const auto& r : requirements_) {
    bool eq = FieldValue(obj, r.field) == r.value;
    if (eq != r.equals) return false;
  }
  return true;
}

std::optional<std::string> FieldSelector::RequiredValue(std::string_view field) const {
  for (const auto& r : requirements_) {
    if (r.equals && r.field == field) return r.value;
  }
  return std::nullopt;
}

std::string FieldSelector::String() const {
  std::string s;
  for (size_t i = 0; i < requirements_.size(); ++i) {
    if (i) s += ",";
    s += requirements_[i].field + (requirements_[i].equals ? "=" : "!=") +
         Escape(requirements_[i].value);
  }
  return s;
}

}  // namespace gpuop::simkube
