// Phase patterns: how `kvgate coldstart` recognises, in a server's log, the moment each
// startup phase ends.
//
// A pattern set is an ordered list of phases; each phase ends at the first log line that
// matches one of its regexes (ECMAScript syntax, searched anywhere in the line). A phase's
// duration is the time from the end of the previous phase that was seen (or from the
// launch, for the first) to its own end. Presets ship for vLLM's own log lines and for
// `kvgate engine`; users can load their own from YAML:
//
//   name: my-server
//   phases:
//     - name: imports            # identifier, used in JSON
//       label: python imports    # used in the table (defaults to the name)
//       end: 'vLLM API server version'          # one regex ...
//     - name: weights
//       end: ['Loading weights took', 'Model loading took']   # ... or several
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::coldstart {

struct PhasePattern {
  std::string name;
  std::string label;
  std::vector<std::string> end_regexes;
};

struct PatternSet {
  std::string name;
  std::vector<PhasePattern> phases;
};

// The preset names, in the order `--help` lists them.
std::vector<std::string_view> preset_names();
// "vllm" | "kvgate-engine".
Result<PatternSet> preset_patterns(std::string_view name);

// Parses the YAML format above. Checks that there is at least one phase, that names are
// unique and non-empty and that every regex compiles.
Result<PatternSet> parse_patterns_yaml(std::string_view yaml_text);

}  // namespace kvgate::coldstart
