// read_file: a whole file as bytes, or an error naming the file and the reason.
//
// The one place the shells read a file whole (configs, scenarios, tokenizers, tokens,
// profiles), so that a test can see every read go through it and every refusal reads
// the same way: "cannot read tokenizer.json: No such file or directory".
#pragma once

#include <string>

#include "core/common/result.h"

namespace kvgate::env {

Result<std::string> read_file(const std::string& path);

}  // namespace kvgate::env
