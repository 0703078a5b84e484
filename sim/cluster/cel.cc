#include "sim/cluster/cel.h"

#include <cctype>
#include <cstdint>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "base/strings.h"
#include "sim/cluster/controller_common.h"

namespace gpuop::simcluster {

using kube::Json;

namespace {

constexpr std::string_view kSupported =
    "supported: device.driver, device.attributes['<domain>'].<id>, "
    "device.capacity['<domain>'].<id>, string/int/bool literals, == != < <= > >=, && || !, "
    "semver() and quantity() with compareTo/isGreaterThan/isLessThan";

Status Unsupported(std::string_view construct) {
  return InvalidArgument(std::string(construct) + " is not supported by the simulator's CEL (" +
                         std::string(kSupported) + ")");
}

// --- Values ---

// A semantic version (semver 2.0): build metadata does not take part in
// comparisons, a pre-release sorts before its release.
struct Version {
  uint64_t major = 0, minor = 0, patch = 0;
  std::vector<std::string> pre;
};

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::optional<uint64_t> ParseNumber(std::string_view s) {
  if (!AllDigits(s) || (s.size() > 1 && s[0] == '0') || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

std::optional<Version> ParseVersion(std::string_view s) {
  if (size_t plus = s.find('+'); plus != std::string_view::npos) s = s.substr(0, plus);
  std::string_view core = s, pre;
  if (size_t dash = s.find('-'); dash != std::string_view::npos) {
    core = s.substr(0, dash);
    pre = s.substr(dash + 1);
    if (pre.empty()) return std::nullopt;
  }
  std::vector<std::string> parts = Split(core, '.', /*skip_empty=*/false);
  if (parts.size() != 3) return std::nullopt;
  Version v;
  uint64_t* fields[] = {&v.major, &v.minor, &v.patch};
  for (size_t i = 0; i < 3; ++i) {
    auto n = ParseNumber(parts[i]);
    if (!n) return std::nullopt;
    *fields[i] = *n;
  }
  if (!pre.empty()) {
    v.pre = Split(pre, '.', /*skip_empty=*/false);
    for (const auto& id : v.pre) {
      if (id.empty()) return std::nullopt;
      if (AllDigits(id) && id.size() > 1 && id[0] == '0') return std::nullopt;
    }
  }
  return v;
}

int Sign(auto a, auto b) { return a < b ? -1 : (a > b ? 1 : 0); }

int CompareVersions(const Version& a, const Version& b) {
  if (int c = Sign(a.major, b.major)) return c;
  if (int c = Sign(a.minor, b.minor)) return c;
  if (int c = Sign(a.patch, b.patch)) return c;
  if (a.pre.empty() || b.pre.empty()) return Sign(a.pre.empty(), b.pre.empty());
  for (size_t i = 0; i < a.pre.size() && i < b.pre.size(); ++i) {
    const bool an = AllDigits(a.pre[i]), bn = AllDigits(b.pre[i]);
    int c = 0;
    if (an && bn) {
      c = Sign(a.pre[i].size(), b.pre[i].size());  // no leading zeros: length orders numbers
      if (c == 0) c = Sign(a.pre[i], b.pre[i]);
    } else if (an != bn) {
      c = an ? -1 : 1;  // numeric identifiers sort first
    } else {
      c = Sign(a.pre[i], b.pre[i]);
    }
    if (c != 0) return c;
  }
  return Sign(a.pre.size(), b.pre.size());
}

struct Quantity {
  int64_t milli = 0;
};

using Value = std::variant<bool, int64_t, std::string, Version, Quantity>;

std::string TypeName(const Value& v) {
  switch (v.index()) {
    case 0:
      return "bool";
    case 1:
      return "int";
    case 2:
      return "string";
    case 3:
      return "semver";
    default:
      return "quantity";
  }
}

}  // namespace

// --- The tree ---

struct CelSelector::Node {
  enum class Kind { kLiteral, kDriver, kAttribute, kCapacity, kNot, kAnd, kOr, kCompare, kMethod };
  Kind kind = Kind::kLiteral;
  Value literal;
  std::string domain, id;  // kAttribute, kCapacity
  std::string op;          // kCompare: "==", "<", ...; kMethod: the method name
  std::shared_ptr<const Node> a, b;
};

namespace {

using Node = CelSelector::Node;
using NodePtr = std::shared_ptr<const Node>;

// --- Lexer ---

struct Token {
  enum class Kind { kIdent, kString, kInt, kPunct, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // identifier, punctuation, or the decoded string
  int64_t number = 0;
};

Result<std::vector<Token>> Lex(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  auto at = [&](size_t k) { return k < s.size() ? s[k] : '\0'; };
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      std::string word(s.substr(i, j - i));
      if ((at(j) == '\'' || at(j) == '"') && (word == "r" || word == "R" || word == "b" ||
                                              word == "B" || word == "rb" || word == "br")) {
        return Unsupported("a raw or bytes string literal (" + word + "'...')");
      }
      out.push_back({Token::Kind::kIdent, std::move(word), 0});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (c == '0' && (at(i + 1) == 'x' || at(i + 1) == 'X')) {
        return Unsupported("a hexadecimal literal");
      }
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (at(j) == '.' || at(j) == 'e' || at(j) == 'E') {
        return Unsupported("a floating-point literal");
      }
      if (at(j) == 'u' || at(j) == 'U') return Unsupported("an unsigned literal");
      std::string digits(s.substr(i, j - i));
      if (digits.size() > 18) {
        return InvalidArgument("integer literal " + digits + " is out of range");
      }
      out.push_back({Token::Kind::kInt, digits, std::stoll(digits)});
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      if (at(i + 1) == c && at(i + 2) == c) return Unsupported("a triple-quoted string literal");
      std::string value;
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= s.size()) return InvalidArgument("unterminated string literal");
        if (s[j] == c) break;
        if (s[j] != '\\') {
          value += s[j];
          continue;
        }
        const char e = at(++j);
        switch (e) {
          case '\\':
          case '\'':
          case '"':
          case '`':
          case '?':
            value += e;
            break;
          case 'n':
            value += '\n';
            break;
          case 't':
            value += '\t';
            break;
          case 'r':
            value += '\r';
            break;
          default:
            return Unsupported(std::string("the escape sequence \\") + e);
        }
      }
      out.push_back({Token::Kind::kString, std::move(value), 0});
      i = j + 1;
      continue;
    }
    static const char* const kTwo[] = {"==", "!=", "<=", ">=", "&&", "||"};
    bool two = false;
    for (const char* p : kTwo) {
      if (s.substr(i, 2) == p) {
        out.push_back({Token::Kind::kPunct, p, 0});
        i += 2;
        two = true;
        break;
      }
    }
    if (two) continue;
    switch (c) {
      case '<':
      case '>':
      case '!':
      case '(':
      case ')':
      case '[':
      case ']':
      case '.':
      case ',':
      case '-':
        out.push_back({Token::Kind::kPunct, std::string(1, c), 0});
        ++i;
        continue;
      case '+':
      case '*':
      case '/':
      case '%':
        return Unsupported(std::string("arithmetic ('") + c + "')");
      case '?':
      case ':':
        return Unsupported("the conditional operator (?:)");
      case '{':
      case '}':
        return Unsupported("a map or message literal ({...})");
      default:
        return InvalidArgument(std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Token::Kind::kEnd, "", 0});
  return out;
}

// --- Parser ---

// What a member chain has reached: a value, or a step on the way to one.
struct Item {
  enum class Kind { kValue, kDevice, kAttributes, kCapacity, kAttributeDomain, kCapacityDomain };
  Kind kind = Kind::kValue;
  NodePtr node;        // kValue
  std::string domain;  // k*Domain
};

NodePtr Make(Node n) { return std::make_shared<const Node>(std::move(n)); }

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Result<NodePtr> ParseAll() {
    GPUOP_ASSIGN_OR_RETURN(NodePtr root, Or());
    if (Peek().kind != Token::Kind::kEnd) return Unexpected("end of expression");
    return root;
  }

 private:
  const Token& Peek() const { return tokens_[pos_]; }
  bool IsPunct(std::string_view p) const {
    return Peek().kind == Token::Kind::kPunct && Peek().text == p;
  }
  bool Accept(std::string_view p) {
    if (!IsPunct(p)) return false;
    ++pos_;
    return true;
  }
  Status Unexpected(std::string_view wanted) const {
    const Token& t = Peek();
    const std::string got = t.kind == Token::Kind::kEnd      ? "the end"
                            : t.kind == Token::Kind::kString ? "a string literal"
                                                             : "'" + t.text + "'";
    return InvalidArgument("syntax error: expected " + std::string(wanted) + ", found " + got);
  }
  Status Expect(std::string_view p) {
    return Accept(p) ? Status::Ok() : Unexpected("'" + std::string(p) + "'");
  }

  Result<NodePtr> Or() {
    GPUOP_ASSIGN_OR_RETURN(NodePtr left, And());
    while (Accept("||")) {
      GPUOP_ASSIGN_OR_RETURN(NodePtr right, And());
      left = Make({Node::Kind::kOr, {}, "", "", "", left, right});
    }
    return left;
  }

  Result<NodePtr> And() {
    GPUOP_ASSIGN_OR_RETURN(NodePtr left, Relation());
    while (Accept("&&")) {
      GPUOP_ASSIGN_OR_RETURN(NodePtr right, Relation());
      left = Make({Node::Kind::kAnd, {}, "", "", "", left, right});
    }
    return left;
  }

  Result<NodePtr> Relation() {
    GPUOP_ASSIGN_OR_RETURN(NodePtr left, Unary());
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (!Accept(op)) continue;
      GPUOP_ASSIGN_OR_RETURN(NodePtr right, Unary());
      for (const char* again : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (IsPunct(again)) return Unsupported("a chained comparison (a < b < c)");
      }
      return Make({Node::Kind::kCompare, {}, "", "", op, left, right});
    }
    if (Peek().kind == Token::Kind::kIdent && Peek().text == "in") {
      return Unsupported("the 'in' operator");
    }
    return left;
  }

  Result<NodePtr> Unary() {
    if (Accept("!")) {
      GPUOP_ASSIGN_OR_RETURN(NodePtr operand, Unary());
      return Make({Node::Kind::kNot, {}, "", "", "", operand, nullptr});
    }
    if (Accept("-")) {
      if (Peek().kind != Token::Kind::kInt) return Unsupported("arithmetic ('-')");
      const int64_t v = -tokens_[pos_++].number;
      return Make({Node::Kind::kLiteral, Value(v)});
    }
    GPUOP_ASSIGN_OR_RETURN(Item item, Member());
    return Finish(item);
  }

  static Result<NodePtr> Finish(const Item& item) {
    switch (item.kind) {
      case Item::Kind::kValue:
        return item.node;
      case Item::Kind::kDevice:
        return Unsupported("'device' as a whole value");
      case Item::Kind::kAttributes:
      case Item::Kind::kCapacity:
        return Unsupported("a whole device.attributes or device.capacity map");
      default:
        return Unsupported("a whole domain map (device.attributes['" + item.domain +
                           "'] without .<id>)");
    }
  }

  Result<std::string> StringLiteralArgument(std::string_view what) {
    if (Peek().kind != Token::Kind::kString) {
      return Unsupported(std::string(what) + " with an argument that is not a string literal");
    }
    return tokens_[pos_++].text;
  }

  Result<Item> Member() {
    GPUOP_ASSIGN_OR_RETURN(Item item, Primary());
    for (;;) {
      if (Accept(".")) {
        if (Peek().kind != Token::Kind::kIdent) return Unexpected("a field or method name");
        const std::string name = tokens_[pos_++].text;
        if (IsPunct("(")) {
          GPUOP_ASSIGN_OR_RETURN(item, Method(item, name));
          continue;
        }
        GPUOP_ASSIGN_OR_RETURN(item, Field(item, name));
        continue;
      }
      if (Accept("[")) {
        if (item.kind != Item::Kind::kAttributes && item.kind != Item::Kind::kCapacity &&
            item.kind != Item::Kind::kAttributeDomain && item.kind != Item::Kind::kCapacityDomain) {
          return Unsupported("indexing ([...]) anything but device.attributes or device.capacity");
        }
        GPUOP_ASSIGN_OR_RETURN(std::string key, StringLiteralArgument("indexing"));
        GPUOP_RETURN_IF_ERROR(Expect("]"));
        GPUOP_ASSIGN_OR_RETURN(item, Field(item, key));
        continue;
      }
      return item;
    }
  }

  // item.name or item['name'].
  static Result<Item> Field(const Item& item, const std::string& name) {
    switch (item.kind) {
      case Item::Kind::kDevice:
        if (name == "driver") return Item{Item::Kind::kValue, Make({Node::Kind::kDriver}), ""};
        if (name == "attributes") return Item{Item::Kind::kAttributes, nullptr, ""};
        if (name == "capacity") return Item{Item::Kind::kCapacity, nullptr, ""};
        return Unsupported("the field device." + name);
      case Item::Kind::kAttributes:
        return Item{Item::Kind::kAttributeDomain, nullptr, name};
      case Item::Kind::kCapacity:
        return Item{Item::Kind::kCapacityDomain, nullptr, name};
      case Item::Kind::kAttributeDomain:
      case Item::Kind::kCapacityDomain: {
        Node n;
        n.kind = item.kind == Item::Kind::kAttributeDomain ? Node::Kind::kAttribute
                                                           : Node::Kind::kCapacity;
        n.domain = item.domain;
        n.id = name;
        return Item{Item::Kind::kValue, Make(std::move(n)), ""};
      }
      case Item::Kind::kValue:
        return Unsupported("the field selection ." + name + " on a value");
    }
    return Unsupported("the field ." + name);
  }

  Result<Item> Method(const Item& receiver, const std::string& name) {
    if (name != "compareTo" && name != "isGreaterThan" && name != "isLessThan") {
      return Unsupported("the method " + name + "()");
    }
    GPUOP_ASSIGN_OR_RETURN(NodePtr recv, Finish(receiver));
    GPUOP_RETURN_IF_ERROR(Expect("("));
    GPUOP_ASSIGN_OR_RETURN(NodePtr arg, Or());
    if (IsPunct(",")) return Unsupported(name + "() with more than one argument");
    GPUOP_RETURN_IF_ERROR(Expect(")"));
    return Item{Item::Kind::kValue, Make({Node::Kind::kMethod, {}, "", "", name, recv, arg}), ""};
  }

  Result<Item> Primary() {
    const Token t = Peek();
    if (t.kind == Token::Kind::kInt) {
      ++pos_;
      return Item{Item::Kind::kValue, Make({Node::Kind::kLiteral, Value(t.number)}), ""};
    }
    if (t.kind == Token::Kind::kString) {
      ++pos_;
      return Item{Item::Kind::kValue, Make({Node::Kind::kLiteral, Value(t.text)}), ""};
    }
    if (Accept("(")) {
      GPUOP_ASSIGN_OR_RETURN(NodePtr inner, Or());
      GPUOP_RETURN_IF_ERROR(Expect(")"));
      return Item{Item::Kind::kValue, inner, ""};
    }
    if (IsPunct("[")) return Unsupported("a list literal ([...])");
    if (t.kind != Token::Kind::kIdent) return Unexpected("a value");
    ++pos_;
    if (t.text == "true" || t.text == "false") {
      return Item{Item::Kind::kValue, Make({Node::Kind::kLiteral, Value(t.text == "true")}), ""};
    }
    if (t.text == "device") return Item{Item::Kind::kDevice, nullptr, ""};
    if (!IsPunct("(")) {
      if (t.text == "null") return Unsupported("null");
      return Unsupported("the identifier '" + t.text + "'");
    }
    if (t.text == "has") return Unsupported("the has() macro");
    if (t.text != "semver" && t.text != "quantity") {
      return Unsupported("the function " + t.text + "()");
    }
    GPUOP_RETURN_IF_ERROR(Expect("("));
    GPUOP_ASSIGN_OR_RETURN(std::string text, StringLiteralArgument(t.text + "()"));
    if (IsPunct(",")) return Unsupported(t.text + "() with more than one argument");
    GPUOP_RETURN_IF_ERROR(Expect(")"));
    if (t.text == "semver") {
      auto v = ParseVersion(text);
      if (!v) return InvalidArgument("semver('" + text + "'): not a semantic version (x.y.z)");
      return Item{Item::Kind::kValue, Make({Node::Kind::kLiteral, Value(*v)}), ""};
    }
    auto q = ParseQuantityMilli(Json(text));
    if (!q) return InvalidArgument("quantity('" + text + "'): not a quantity such as 10Gi");
    return Item{Item::Kind::kValue, Make({Node::Kind::kLiteral, Value(Quantity{*q})}), ""};
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

// --- Evaluation ---

Status NoSuchKey(const std::string& key) { return InvalidArgument("no such key: " + key); }

Status NoOverload(std::string_view op, const Value& a, const Value& b) {
  return InvalidArgument("no such overload: " + TypeName(a) + " " + std::string(op) + " " +
                         TypeName(b));
}

// The entry of `map` (attributes or capacity) for domain.id, where names
// without a domain belong to the driver's.
const Json* Lookup(const Json& map, std::string_view driver, const std::string& domain,
                   const std::string& id) {
  if (!map.is_object()) return nullptr;
  if (auto it = map.find(domain + "/" + id); it != map.end()) return &*it;
  if (domain == driver) {
    if (auto it = map.find(id); it != map.end()) return &*it;
  }
  return nullptr;
}

Result<Value> AttributeValue(const Json& attr, const std::string& id) {
  if (attr.is_object()) {
    if (auto s = attr.find("string"); s != attr.end() && s->is_string()) {
      return Value(s->get<std::string>());
    }
    if (auto i = attr.find("int"); i != attr.end() && i->is_number_integer()) {
      return Value(i->get<int64_t>());
    }
    if (auto b = attr.find("bool"); b != attr.end() && b->is_boolean()) {
      return Value(b->get<bool>());
    }
    if (auto v = attr.find("version"); v != attr.end() && v->is_string()) {
      if (auto parsed = ParseVersion(v->get<std::string>())) return Value(*parsed);
      return InvalidArgument("attribute " + id + ": version '" + v->get<std::string>() +
                             "' is not a semantic version");
    }
  }
  return InvalidArgument("attribute " + id + " has no int, bool, string or version value");
}

Result<bool> Compare(const std::string& op, const Value& a, const Value& b) {
  if (a.index() != b.index()) {
    if (op == "==") return false;  // CEL's heterogeneous equality
    if (op == "!=") return true;
    return NoOverload(op, a, b);
  }
  int c = 0;
  bool ordered = true;
  if (auto* x = std::get_if<int64_t>(&a)) {
    c = Sign(*x, std::get<int64_t>(b));
  } else if (auto* s = std::get_if<std::string>(&a)) {
    c = Sign(s->compare(std::get<std::string>(b)), 0);
  } else if (auto* f = std::get_if<bool>(&a)) {
    c = Sign(*f, std::get<bool>(b));
  } else if (auto* v = std::get_if<Version>(&a)) {
    c = CompareVersions(*v, std::get<Version>(b));
    ordered = false;  // semver orders only through compareTo and friends
  } else {
    c = Sign(std::get<Quantity>(a).milli, std::get<Quantity>(b).milli);
    ordered = false;
  }
  if (op == "==") return c == 0;
  if (op == "!=") return c != 0;
  if (!ordered) return NoOverload(op, a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

struct Evaluator {
  const Json& device;
  std::string_view driver;

  Result<bool> Bool(const Node& n) const {
    GPUOP_ASSIGN_OR_RETURN(Value v, Eval(n));
    if (auto* b = std::get_if<bool>(&v)) return *b;
    return InvalidArgument("no such overload: a logical operator applied to " + TypeName(v));
  }

  Result<Value> Eval(const Node& n) const {
    switch (n.kind) {
      case Node::Kind::kLiteral:
        return n.literal;
      case Node::Kind::kDriver:
        return Value(std::string(driver));
      case Node::Kind::kAttribute: {
        const Json* attr = Lookup(Member(device, "attributes"), driver, n.domain, n.id);
        if (attr == nullptr) return NoSuchKey(n.id);
        return AttributeValue(*attr, n.id);
      }
      case Node::Kind::kCapacity: {
        const Json* cap = Lookup(Member(device, "capacity"), driver, n.domain, n.id);
        if (cap == nullptr) return NoSuchKey(n.id);
        auto q = ParseQuantityMilli(Member(*cap, "value"));
        if (!q) return InvalidArgument("capacity " + n.id + " has no valid quantity value");
        return Value(Quantity{*q});
      }
      case Node::Kind::kNot: {
        GPUOP_ASSIGN_OR_RETURN(bool v, Bool(*n.a));
        return Value(!v);
      }
      case Node::Kind::kAnd:
      case Node::Kind::kOr: {
        // The side that decides wins over an error on the other side.
        const bool decisive = n.kind == Node::Kind::kOr;
        Result<bool> left = Bool(*n.a);
        if (left.ok() && *left == decisive) return Value(decisive);
        Result<bool> right = Bool(*n.b);
        if (right.ok() && *right == decisive) return Value(decisive);
        if (!left.ok()) return left.status();
        if (!right.ok()) return right.status();
        return Value(!decisive);
      }
      case Node::Kind::kCompare: {
        GPUOP_ASSIGN_OR_RETURN(Value a, Eval(*n.a));
        GPUOP_ASSIGN_OR_RETURN(Value b, Eval(*n.b));
        GPUOP_ASSIGN_OR_RETURN(bool r, Compare(n.op, a, b));
        return Value(r);
      }
      case Node::Kind::kMethod: {
        GPUOP_ASSIGN_OR_RETURN(Value recv, Eval(*n.a));
        GPUOP_ASSIGN_OR_RETURN(Value arg, Eval(*n.b));
        int c = 0;
        if (recv.index() == arg.index() && std::holds_alternative<Version>(recv)) {
          c = CompareVersions(std::get<Version>(recv), std::get<Version>(arg));
        } else if (recv.index() == arg.index() && std::holds_alternative<Quantity>(recv)) {
          c = Sign(std::get<Quantity>(recv).milli, std::get<Quantity>(arg).milli);
        } else {
          return InvalidArgument("no such overload: " + TypeName(recv) + "." + n.op + "(" +
                                 TypeName(arg) + ")");
        }
        if (n.op == "compareTo") return Value(static_cast<int64_t>(c));
        return Value(n.op == "isGreaterThan" ? c > 0 : c < 0);
      }
    }
    return Internal("unknown CEL node");
  }
};

}  // namespace

Result<CelSelector> CelSelector::Parse(std::string_view expression) {
  auto tokens = Lex(expression);
  Result<NodePtr> root =
      tokens.ok() ? Parser(std::move(tokens).value()).ParseAll() : Result<NodePtr>(tokens.status());
  if (!root.ok()) {
    return InvalidArgument("CEL expression \"" + std::string(expression) +
                           "\": " + root.status().message());
  }
  return CelSelector(std::string(expression), std::move(root).value());
}

Result<bool> CelSelector::Evaluate(const Json& device, std::string_view driver) const {
  Evaluator e{device, driver};
  Result<Value> v = e.Eval(*root_);
  if (!v.ok()) return v.status();
  if (auto* b = std::get_if<bool>(&*v)) return *b;
  return InvalidArgument("CEL expression \"" + expression_ + "\" returned a " + TypeName(*v) +
                         ", not a bool");
}

}  // namespace gpuop::simcluster
