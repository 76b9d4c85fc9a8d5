// Machine-readable and visual forms of a ColdstartReport: JSON (every run and the
// summary), and a hand-written SVG bar chart of the medians with range whiskers, one bar
// per phase and cache state.
#pragma once

#include <string>

#include "core/coldstart/coldstart_report.h"

namespace kvgate::coldstart {

// {"command", "health_url", "patterns", "phases": [{name, label}], "runs": [{run, cache,
//  outcome, phases: {name: seconds|null}, time_to_health_s}], "summary": [{cache, runs,
//  rows: [{name, label, count, median_s, min_s, max_s}]}], "warnings": [...]}
std::string report_json(const ColdstartReport& report, double warn_fraction);

// A standalone SVG document (UTF-8, no scripts, no external references).
std::string report_svg(const ColdstartReport& report);

}  // namespace kvgate::coldstart
