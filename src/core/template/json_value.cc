#include "core/template/json_value.h"

#include <boost/json.hpp>

namespace kvgate::jinja {
namespace {

Value convert(const boost::json::value& v, int depth) {
  if (depth > 200) throw TemplateError("JSON nested too deep for a template context");
  switch (v.kind()) {
    case boost::json::kind::null:
      return Value::none();
    case boost::json::kind::bool_:
      return Value::boolean(v.get_bool());
    case boost::json::kind::int64:
      return Value::integer(v.get_int64());
    case boost::json::kind::uint64: {
      const uint64_t u = v.get_uint64();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case boost::json::kind::double_:
      return Value::number(v.get_double());
    case boost::json::kind::string: {
      const auto& s = v.get_string();
      return Value::borrowed(std::string_view(s.data(), s.size()));
    }
    case boost::json::kind::array: {
      ValueList items;
      items.reserve(v.get_array().size());
      for (const auto& x : v.get_array()) items.push_back(convert(x, depth + 1));
      return Value::list(std::move(items));
    }
    case boost::json::kind::object: {
      auto d = make_obj<DictObj>();
      d->items.reserve(v.get_object().size());
      for (const auto& kv : v.get_object()) {
        const auto k = kv.key();
        d->items.emplace_back(Value::borrowed(std::string_view(k.data(), k.size())),
                              convert(kv.value(), depth + 1));
      }
      return Value::dict(std::move(d));
    }
  }
  return Value::none();
}

}  // namespace

// TemplateError stays inside the template engine: callers get a Result.
Result<Value> from_json(const boost::json::value& v) {
  try {
    return convert(v, 0);
  } catch (const TemplateError& e) {
    return Error(ErrorCode::kInvalidArgument, e.what());
  }
}

}  // namespace kvgate::jinja
