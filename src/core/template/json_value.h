// JSON (boost::json) to template Values, without copying strings: the Values view the
// JSON's strings, so the JSON document must outlive every render that uses them.
#pragma once

#include <boost/json/fwd.hpp>

#include "core/common/result.h"
#include "core/template/value.h"

namespace kvgate::jinja {

// Objects become dicts (key order kept), arrays lists, numbers int or float (a uint64
// above INT64_MAX becomes a float, as no Python int is lost in a chat template).
// Fails (kInvalidArgument) for JSON nested over 200 deep.
Result<Value> from_json(const boost::json::value& v);

}  // namespace kvgate::jinja
