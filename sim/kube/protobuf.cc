#include "sim/kube/protobuf.h"

#include <cstdio>
#include <ctime>
#include <optional>
#include <utility>

#include "base/strings.h"
#include "sim/kube/protobuf_tables.h"
#include "sim/kube/tls.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;
using protobuf_tables::ProtobufType;

// ---- Wire format ----------------------------------------------------------

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;

// Reads a message's bytes front to back; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ == data_.size(); }

  Result<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) return InvalidArgument("truncated varint");
      auto byte = static_cast<uint8_t>(data_[pos_++]);
      // The tenth byte holds bit 63 only.
      if (shift == 63 && byte > 1) return InvalidArgument("varint overflows 64 bits");
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return InvalidArgument("varint overflows 64 bits");
  }

  Result<std::string_view> Take(uint64_t n) {
    if (n > data_.size() - pos_) {
      return InvalidArgument("length " + std::to_string(n) + " runs past the end (" +
                             std::to_string(data_.size() - pos_) + " bytes left)");
    }
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  Result<std::string_view> LengthDelimited() {
    GPUOP_ASSIGN_OR_RETURN(uint64_t n, Varint());
    return Take(n);
  }

  // A field tag: number and wire type.
  Result<std::pair<uint32_t, uint32_t>> Tag() {
    GPUOP_ASSIGN_OR_RETURN(uint64_t tag, Varint());
    uint64_t number = tag >> 3;
    if (number == 0 || number > kMaxFieldNumber) {
      return InvalidArgument("invalid field number " + std::to_string(number));
    }
    return std::pair{static_cast<uint32_t>(number), static_cast<uint32_t>(tag & 7)};
  }

  // Skips a field whose tag was just read, groups (nested ones too) included.
  Status Skip(uint32_t number, uint32_t wire) {
    std::vector<uint32_t> open_groups;
    for (;;) {
      switch (wire) {
        case kVarint:
          GPUOP_RETURN_IF_ERROR(Varint().status());
          break;
        case kFixed64:
          GPUOP_RETURN_IF_ERROR(Take(8).status());
          break;
        case kLengthDelimited:
          GPUOP_RETURN_IF_ERROR(LengthDelimited().status());
          break;
        case kFixed32:
          GPUOP_RETURN_IF_ERROR(Take(4).status());
          break;
        case kStartGroup:
          open_groups.push_back(number);
          break;
        case kEndGroup:
          if (open_groups.empty() || open_groups.back() != number) {
            return InvalidArgument("end of group " + std::to_string(number) + " without its start");
          }
          open_groups.pop_back();
          break;
        default:
          return InvalidArgument("invalid wire type " + std::to_string(wire));
      }
      if (open_groups.empty()) return Status::Ok();
      if (done())
        return InvalidArgument("group " + std::to_string(open_groups.back()) + " is not closed");
      GPUOP_ASSIGN_OR_RETURN(auto tag, Tag());
      number = tag.first;
      wire = tag.second;
    }
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<uint8_t>(s[i]);
    size_t extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (extra > s.size() - i - 1) return false;
    for (size_t k = 1; k <= extra; ++k) {
      auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[extra] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    i += extra + 1;
  }
  return true;
}

// The last occurrence of length-delimited field `number` in a small wrapper
// message (Quantity, RawExtension, Unknown.raw); nullopt when absent.
Result<std::optional<std::string_view>> LastBytesField(std::string_view bytes, uint32_t number) {
  Reader r(bytes);
  std::optional<std::string_view> found;
  while (!r.done()) {
    GPUOP_ASSIGN_OR_RETURN(auto tag, r.Tag());
    if (tag.first != number) {
      GPUOP_RETURN_IF_ERROR(r.Skip(tag.first, tag.second));
      continue;
    }
    if (tag.second != kLengthDelimited) {
      return InvalidArgument("field " + std::to_string(number) + " has wire type " +
                             std::to_string(tag.second) + ", want 2 (length-delimited)");
    }
    GPUOP_ASSIGN_OR_RETURN(found, r.LengthDelimited());
  }
  return found;
}

// Go's time.Time JSON form, in UTC, for the years it accepts (0000-9999).
Result<Json> FormatTime(int64_t seconds) {
  constexpr int64_t kMin = -62167219200;  // 0000-01-01T00:00:00Z
  constexpr int64_t kMax = 253402300799;  // 9999-12-31T23:59:59Z
  if (seconds < kMin || seconds > kMax) {
    return InvalidArgument("time " + std::to_string(seconds) + "s is outside years 0000-9999");
  }
  auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];  // room for any int, as the compiler cannot see tm's ranges
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return Json(buf);
}

bool IsVarintKind(ProtoKind kind) {
  return kind == ProtoKind::kInt32 || kind == ProtoKind::kInt64 || kind == ProtoKind::kBool;
}

Json VarintJson(ProtoKind kind, uint64_t v) {
  switch (kind) {
    case ProtoKind::kInt32:
      return static_cast<int32_t>(v);
    case ProtoKind::kBool:
      return v != 0;
    default:
      return static_cast<int64_t>(v);
  }
}

Json ZeroValue(ProtoKind kind) {
  switch (kind) {
    case ProtoKind::kInt32:
    case ProtoKind::kInt64:
      return 0;
    case ProtoKind::kBool:
      return false;
    case ProtoKind::kMessage:
      return Json::object();
    case ProtoKind::kTime:
    case ProtoKind::kRawExtension:
      return nullptr;
    case ProtoKind::kQuantity:
      return "0";
    case ProtoKind::kIntOrString:
      return 0;
    default:
      return "";
  }
}

bool IsEmpty(const Json& v) {
  return (v.is_string() && v.get_ref<const std::string&>().empty()) ||
         (v.is_number_integer() && v.get<int64_t>() == 0) || (v.is_boolean() && !v.get<bool>());
}

Status DecodeInto(const ProtoMessage& message, std::string_view bytes, Json& out);
Status ApplyEmitRules(const ProtoMessage& message, Json& out);

// The JSON of one length-delimited value of a non-varint kind.
Result<Json> DecodeValue(const ProtoField& f, std::string_view bytes) {
  switch (f.kind) {
    case ProtoKind::kString:
      if (!IsValidUtf8(bytes)) return InvalidArgument("the string is not valid UTF-8");
      return Json(std::string(bytes));
    case ProtoKind::kBytes:
      return Json(Base64Encode(std::string(bytes)));
    case ProtoKind::kMessage: {
      Json obj = Json::object();
      GPUOP_RETURN_IF_ERROR(DecodeInto(*f.message, bytes, obj));
      return obj;
    }
    case ProtoKind::kTime: {
      // metav1.Time keeps whole seconds (nanos=2 is dropped, as Go does); an
      // empty message is the zero time, which Go writes as null.
      if (bytes.empty()) return Json(nullptr);
      Json ts = Json::object();
      GPUOP_RETURN_IF_ERROR(DecodeInto(protobuf_tables::TimestampMessage(), bytes, ts));
      return FormatTime(ts.value("seconds", int64_t{0}));
    }
    case ProtoKind::kQuantity: {
      GPUOP_ASSIGN_OR_RETURN(auto s, LastBytesField(bytes, 1));
      if (!s || s->empty()) return Json("0");
      if (!IsValidUtf8(*s)) return InvalidArgument("the quantity is not valid UTF-8");
      return Json(std::string(*s));
    }
    case ProtoKind::kIntOrString: {
      Json v = Json::object();
      GPUOP_RETURN_IF_ERROR(DecodeInto(protobuf_tables::IntOrStringMessage(), bytes, v));
      if (v.value("type", int64_t{0}) == 1) return Json(v.value("strVal", ""));
      return Json(v.value("intVal", 0));
    }
    case ProtoKind::kRawExtension: {
      GPUOP_ASSIGN_OR_RETURN(auto raw, LastBytesField(bytes, 1));
      if (!raw || raw->empty()) return Json(nullptr);
      Json parsed = Json::parse(*raw, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded()) return InvalidArgument("the raw value is not JSON");
      return parsed;
    }
    default:
      return Internal("varint kind in DecodeValue");
  }
}

// Decodes one occurrence of field `f` (its tag just read) into `out`.
Status DecodeField(const ProtoField& f, uint32_t wire, Reader& r, Json& out) {
  const std::string name(f.json_name);
  if (IsVarintKind(f.kind) && f.label != ProtoLabel::kMap) {
    if (f.label == ProtoLabel::kRepeated && wire == kLengthDelimited) {  // packed
      GPUOP_ASSIGN_OR_RETURN(auto packed, r.LengthDelimited());
      Reader pr(packed);
      Json& arr = out[name];
      while (!pr.done()) {
        GPUOP_ASSIGN_OR_RETURN(uint64_t v, pr.Varint());
        arr.push_back(VarintJson(f.kind, v));
      }
      return Status::Ok();
    }
    if (wire != kVarint) {
      return InvalidArgument("wire type " + std::to_string(wire) + ", want 0 (varint)");
    }
    GPUOP_ASSIGN_OR_RETURN(uint64_t v, r.Varint());
    if (f.label == ProtoLabel::kRepeated) {
      out[name].push_back(VarintJson(f.kind, v));
    } else {
      out[name] = VarintJson(f.kind, v);
    }
    return Status::Ok();
  }
  if (wire != kLengthDelimited) {
    return InvalidArgument("wire type " + std::to_string(wire) + ", want 2 (length-delimited)");
  }
  GPUOP_ASSIGN_OR_RETURN(auto bytes, r.LengthDelimited());
  switch (f.label) {
    case ProtoLabel::kMap: {
      // A map entry: key=1 (string), value=2; either may be missing (zero).
      ProtoField value_field = f;
      value_field.number = 2;
      value_field.json_name = "value";
      value_field.label = ProtoLabel::kSingular;
      value_field.emit = ProtoEmit::kAlways;
      const ProtoField entry_fields[] = {
          {1, "key", ProtoKind::kString, ProtoLabel::kSingular, ProtoEmit::kAlways}, value_field};
      Json entry = Json::object();
      GPUOP_RETURN_IF_ERROR(DecodeInto({"map entry", entry_fields}, bytes, entry));
      Json& map = out[name];
      if (!map.is_object()) map = Json::object();
      map[entry["key"].get<std::string>()] = std::move(entry["value"]);
      return Status::Ok();
    }
    case ProtoLabel::kRepeated: {
      GPUOP_ASSIGN_OR_RETURN(Json v, DecodeValue(f, bytes));
      out[name].push_back(std::move(v));
      return Status::Ok();
    }
    case ProtoLabel::kSingular:
      if (f.kind == ProtoKind::kMessage) {
        // An embedded struct's fields are the parent's.
        if (f.json_name.empty()) return DecodeInto(*f.message, bytes, out);
        // A repeated occurrence of a singular message merges into it.
        Json& obj = out[name];
        if (!obj.is_object()) obj = Json::object();
        return DecodeInto(*f.message, bytes, obj);
      }
      GPUOP_ASSIGN_OR_RETURN(out[name], DecodeValue(f, bytes));
      return Status::Ok();
  }
  return Status::Ok();
}

Status DecodeInto(const ProtoMessage& message, std::string_view bytes, Json& out) {
  Reader r(bytes);
  while (!r.done()) {
    auto tag = r.Tag();
    if (!tag.ok()) return tag.status().Annotate(std::string(message.name));
    auto [number, wire] = *tag;
    const ProtoField* field = nullptr;
    for (const ProtoField& f : message.fields) {
      if (f.number == number) field = &f;
    }
    if (field == nullptr) {
      if (auto s = r.Skip(number, wire); !s.ok()) {
        return s.Annotate(std::string(message.name) + " field " + std::to_string(number));
      }
      continue;
    }
    if (auto s = DecodeField(*field, wire, r, out); !s.ok()) {
      // An embedded struct is named by its type.
      std::string_view what = field->json_name.empty() ? field->message->name : field->json_name;
      return s.Annotate(std::string(message.name) + "." + std::string(what) + " (field " +
                        std::to_string(number) + ")");
    }
  }
  return ApplyEmitRules(message, out);
}

// What Go's encoding/json writes for the fields of `message` that are absent
// or zero in `out`: an omitempty zero value is left out; a field without
// omitempty is written as its zero value, a struct as its zero struct (its
// own such fields included), a nil slice or map as null.
Status ApplyEmitRules(const ProtoMessage& message, Json& out) {
  for (const ProtoField& f : message.fields) {
    if (f.kind == ProtoKind::kMessage && f.json_name.empty()) {  // embedded: idempotent
      GPUOP_RETURN_IF_ERROR(ApplyEmitRules(*f.message, out));
      continue;
    }
    const std::string name(f.json_name);
    if (out.contains(name)) {
      if (f.label == ProtoLabel::kSingular && f.emit == ProtoEmit::kUnlessEmpty &&
          IsEmpty(out[name])) {
        out.erase(name);
      }
      continue;
    }
    if (f.emit != ProtoEmit::kAlways) continue;
    if (f.label != ProtoLabel::kSingular) {
      out[name] = nullptr;
    } else if (f.kind == ProtoKind::kMessage) {
      Json zero = Json::object();
      GPUOP_RETURN_IF_ERROR(ApplyEmitRules(*f.message, zero));
      out[name] = std::move(zero);
    } else {
      out[name] = ZeroValue(f.kind);
    }
  }
  return Status::Ok();
}

const ProtobufType* FindType(std::string_view api_version, std::string_view kind) {
  for (const ProtobufType& t : protobuf_tables::Types()) {
    if ((t.api_version.empty() || t.api_version == api_version) && t.kind == kind) return &t;
  }
  return nullptr;
}

}  // namespace

Result<Json> DecodeProtoMessage(const ProtoMessage& message, std::string_view bytes) {
  Json out = Json::object();
  if (auto s = DecodeInto(message, bytes, out); !s.ok()) {
    return InvalidArgument("malformed protobuf body: " + s.message());
  }
  return out;
}

std::vector<std::string> ProtobufKinds() {
  std::vector<std::string> kinds;
  for (const ProtobufType& t : protobuf_tables::Types()) {
    kinds.push_back(t.api_version.empty() ? std::string(t.kind) + " (any apiVersion)"
                                          : std::string(t.api_version) + " " + std::string(t.kind));
  }
  return kinds;
}

Result<Json> DecodeKubeProtobuf(std::string_view body) {
  constexpr std::string_view kMagic("k8s\0", 4);
  if (body.substr(0, kMagic.size()) != kMagic) {
    return InvalidArgument(
        "malformed protobuf body: it does not start with the Kubernetes magic \"k8s\\x00\"; "
        "send JSON or a protobuf body as client-go encodes it");
  }
  std::string_view envelope = body.substr(kMagic.size());
  GPUOP_ASSIGN_OR_RETURN(Json unknown,
                         DecodeProtoMessage(protobuf_tables::UnknownMessage(), envelope));
  auto raw = LastBytesField(envelope, 2);
  if (!raw.ok()) {
    return InvalidArgument("malformed protobuf body: Unknown.raw (field 2): " +
                           raw.status().message());
  }

  Json type_meta = unknown.value("typeMeta", Json::object());
  std::string api_version = type_meta.value("apiVersion", "");
  std::string kind = type_meta.value("kind", "");
  std::string encoding = unknown.value("contentEncoding", "");
  std::string content_type = unknown.value("contentType", "");
  if (!encoding.empty()) {
    return NotSupported("the API emulator does not decode protobuf bodies with contentEncoding \"" +
                        encoding + "\"; send the object unencoded or as JSON");
  }
  if (!content_type.empty() && content_type != kProtobufMediaType) {
    return NotSupported("the API emulator does not decode a protobuf envelope holding \"" +
                        content_type + "\"; send the object as JSON");
  }
  if (kind.empty()) {
    return InvalidArgument(
        "malformed protobuf body: the envelope (runtime.Unknown) names no kind in its typeMeta");
  }
  const ProtobufType* type = FindType(api_version, kind);
  if (type == nullptr) {
    return NotSupported("the API emulator (gpuop sim apiserver) decodes protobuf bodies of " +
                        Join(ProtobufKinds(), ", ") + " only, not " + api_version + " " + kind +
                        "; send it as JSON (kubectl apply -f, or a client with "
                        "ContentType application/json)");
  }
  GPUOP_ASSIGN_OR_RETURN(Json object, DecodeProtoMessage(*type->message, raw->value_or("")));
  object["apiVersion"] = api_version;
  object["kind"] = kind;
  return object;
}

}  // namespace gpuop::simkube
