#include "core/coldstart/phase_patterns.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside <regex> at -O1 with sanitizers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <yaml-cpp/yaml.h>

#include <regex>
#include <set>

namespace kvgate::coldstart {
namespace {

// vLLM's own messages (V1 engine; the V0 forms where they differ), matched wherever they
// are in the line so that the "(APIServer pid=...) INFO 10-06 12:00:40 [file.py:123]"
// prefix and its variants do not matter. Order follows the seed's table; the boundaries:
//   python imports      launch -> the API server prints its version (or, in newer
//                       releases, its non-default args) after importing vllm
//   engine/worker start -> a worker starts loading the model
//   weight load         -> "Loading weights took" / "Model loading took"
//   torch.compile       -> "torch.compile takes X s in total" (absent with --enforce-eager)
//   CUDA graph capture  -> "Graph capturing finished in X secs"
//   FlashInfer JIT, KV  -> "init engine (profile, create kv cache, warmup model) took"
//   server up           -> uvicorn's "Application startup complete."
PatternSet vllm_set() {
  return PatternSet{
      "vllm",
      {
          {"python_imports",
           "python imports",
           {R"(vLLM API server version)", R"(non-default args:)"}},
          {"engine_worker_start", "engine and worker start", {R"(Starting to load model)"}},
          {"weight_load", "weight load", {R"(Loading weights took)", R"(Model loading took)"}},
          {"torch_compile", "torch.compile", {R"(torch\.compile takes [0-9.]+ s in total)"}},
          {"cuda_graph_capture", "CUDA graph capture", {R"(Graph capturing finished in)"}},
          {"flashinfer_jit_kv_setup",
           "FlashInfer JIT, KV setup",
           {R"(init engine \(profile, create kv cache, warmup model\) took)"}},
          {"server_up", "server up", {R"(Application startup complete)"}},
      }};
}

// `kvgate engine` writes the same vLLM messages; this preset anchors each on the engine's
// own line format ("INFO MM-DD HH:MM:SS [file.py:N] message") so that nothing else the
// engine prints can end a phase.
PatternSet kvgate_engine_set() {
  PatternSet set = vllm_set();
  set.name = "kvgate-engine";
  for (PhasePattern& phase : set.phases) {
    for (std::string& re : phase.end_regexes) {
      if (phase.name == "server_up") {
        re = "^INFO:     " + re;
      } else {
        re =
            R"(^(\([A-Za-z_0-9]+ pid=[0-9]+\) )?INFO [0-9-]+ [0-9:]+ \[[a-z_]+\.py:[0-9]+\] )" + re;
      }
    }
    // The engine prints only the first form.
    phase.end_regexes.resize(1);
  }
  return set;
}

Status check(const PatternSet& set) {
  if (set.phases.empty()) return Error("pattern set '" + set.name + "' has no phases");
  std::set<std::string> names;
  for (const PhasePattern& phase : set.phases) {
    if (phase.name.empty()) return Error("a phase has no name");
    if (!names.insert(phase.name).second) return Error("phase '" + phase.name + "' is repeated");
    if (phase.end_regexes.empty()) return Error("phase '" + phase.name + "' has no 'end' regex");
    for (const std::string& re : phase.end_regexes) {
      try {
        std::regex compiled(re, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return Error("phase '" + phase.name + "': bad regex '" + re + "': " + e.what());
      }
    }
  }
  return {};
}

}  // namespace

std::vector<std::string_view> preset_names() { return {"vllm", "kvgate-engine"}; }

Result<PatternSet> preset_patterns(std::string_view name) {
  if (name == "vllm") return vllm_set();
  if (name == "kvgate-engine") return kvgate_engine_set();
  return Error("unknown pattern preset '" + std::string(name) + "' (vllm, kvgate-engine)");
}

Result<PatternSet> parse_patterns_yaml(std::string_view yaml_text) {
  PatternSet set;
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    if (!root.IsMap()) return Error("patterns: expected a mapping with 'phases'");
    set.name = root["name"] ? root["name"].as<std::string>() : "custom";
    YAML::Node phases = root["phases"];
    if (!phases || !phases.IsSequence()) return Error("patterns: 'phases' must be a list");
    for (const YAML::Node& node : phases) {
      if (!node.IsMap()) return Error("patterns: each phase must be a mapping");
      PhasePattern phase;
      if (node["name"]) phase.name = node["name"].as<std::string>();
      phase.label = node["label"] ? node["label"].as<std::string>() : phase.name;
      YAML::Node end = node["end"];
      if (end && end.IsScalar()) {
        phase.end_regexes.push_back(end.as<std::string>());
      } else if (end && end.IsSequence()) {
        for (const YAML::Node& re : end) phase.end_regexes.push_back(re.as<std::string>());
      }
      set.phases.push_back(std::move(phase));
    }
  } catch (const YAML::Exception& e) {
    return Error(std::string("patterns: ") + e.what());
  }
  if (Status s = check(set); !s) return Error("patterns: " + s.error());
  return set;
}

}  // namespace kvgate::coldstart
