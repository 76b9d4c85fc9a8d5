// JSON text exactly as Python's json.dumps(x, ensure_ascii=False) prints it, which is what
// the `tojson` filter of Hugging Face chat templates produces: ", " and ": " separators,
// keys in their original order, floats as Python's repr (1.0, 1e-05, 1e+16).
#pragma once

#include <boost/json/fwd.hpp>
#include <string>

namespace kvgate::tokenizer {

std::string python_json(const boost::json::value& v);

}  // namespace kvgate::tokenizer
