// read_file: a whole file as bytes, or an error naming the file and the reason.
// write_files: a directory of whole files (the reports of `kvgate sim` and `kvgate bench`).
//
// The one place the shells read a file whole (configs, scenarios, tokenizers, tokens,
// profiles), so that a test can see every read go through it and every refusal reads
// the same way: "cannot read tokenizer.json: No such file or directory".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/common/result.h"

namespace kvgate::env {

Result<std::string> read_file(const std::string& path);

// Creates `dir` if needed and writes each (file name, text) into it, replacing what was
// there; returns the paths written.
Result<std::vector<std::string>> write_files(
    const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace kvgate::env
