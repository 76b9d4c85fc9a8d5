#include "core/engine/profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace kvgate::engine {
namespace {

// Physical inputs of a built-in profile. docs/engine-model.md derives every number.
struct Hardware {
  double hbm_bytes_per_s;  // achieved HBM bandwidth per GPU
  double flops_per_s;      // achieved dense bf16 throughput per GPU (calibrated)
  int tensor_parallel;     // GPUs per replica
  double tp_efficiency;    // compute scaling efficiency across the TP group
  double allreduce_s;      // latency of one small all-reduce across the group
};

struct Model {
  double weight_bytes;   // all parameters, bf16
  double linear_params;  // parameters a prefill token multiplies (no embeddings)
  int layers;
  int attention_dim;  // query heads * head dim
  int kv_heads;
  int head_dim;
};

// Calibration anchors from the seed document (Qwen2.5-7B, one H100, vLLM, compiled):
// one user decodes 166 tokens/s; a 30,000-token prompt takes 1.03 s to its first token
// on an empty cache and 0.09 s fully cached. Solving the step-time model for those three
// points gives the per-step overhead, the effective FLOP rate and the front-end time per
// prompt token (derivation in docs/engine-model.md).
constexpr double kStepOverhead7b = 0.0009376;     // s
constexpr double kEffectiveFlops = 607.31e12;     // FLOP/s per H100
constexpr double kPreprocessPerToken = 2.789e-6;  // s per prompt token
constexpr double kHbm = 3.0e12;                   // B/s achieved on H100 SXM (3.35 peak)
// Host -> GPU copies of offloaded KV (pinned memory, large transfers) over the H100 SXM's
// PCIe 5.0 x16 link: 64 GB/s raw per direction, ~50 GB/s achieved (docs/engine-model.md).
constexpr double kHostLink = 50e9;  // B/s per GPU
// Disk -> host reads of KV offloaded to a local NVMe drive (the disk tier): a PCIe 4.0 x4
// drive reads about 7 GB/s sequentially at best; 5 GB/s through a file system, with one
// drive per GPU (as on 8-GPU servers with 8 data drives). An assumption to calibrate
// against a real disk tier (docs/engine-model.md).
constexpr double kDiskRead = 5e9;  // B/s per GPU

Profile derive(std::string name, const Model& m, const Hardware& hw, double step_overhead,
               uint32_t num_gpu_blocks, uint32_t max_model_len, const StartupTable& startup) {
  const double tp = hw.tensor_parallel;
  const double compute = hw.flops_per_s * tp * (tp > 1 ? hw.tp_efficiency : 1.0);
  const double kv_bytes_per_token = 2.0 * m.layers * m.kv_heads * m.head_dim * 2 /*bf16*/;
  Profile p;
  p.name = std::move(name);
  // Two all-reduces per layer under tensor parallelism.
  p.step_overhead_s = step_overhead + (tp > 1 ? 2.0 * m.layers * hw.allreduce_s : 0.0);
  p.weight_read_s = m.weight_bytes / tp / hw.hbm_bytes_per_s;
  p.linear_s_per_token = 2.0 * m.linear_params / compute;
  p.attention_s_per_token_ctx = 4.0 * m.layers * m.attention_dim / compute;
  p.decode_s_per_ctx_token = kv_bytes_per_token / (tp * hw.hbm_bytes_per_s);
  p.preprocess_s_per_prompt_token = kPreprocessPerToken;
  p.kv_bytes_per_token = kv_bytes_per_token;
  p.host_bytes_per_s = kHostLink * tp;  // each GPU copies its shard over its own link
  p.disk_bytes_per_s = kDiskRead * tp;  // each GPU's shard from its own drive
  p.num_gpu_blocks = num_gpu_blocks;
  p.block_size = 16;
  p.max_model_len = max_model_len;
  p.startup = &startup;
  return p;
}

Profile h100_qwen25_7b() {
  const Model qwen25_7b{15.23e9, 6.53e9, 28, 28 * 128, 4, 128};
  const Hardware h100{kHbm, kEffectiveFlops, 1, 1.0, 0.0};
  // KV capacity: 0.9 x 80 GiB - 15.23 GB weights - 4.2 GB activations/graphs = 57.9 GB;
  // 57,344 B per token -> 1,009,170 tokens -> 63,073 blocks of 16.
  return derive("h100-qwen2.5-7b", qwen25_7b, h100, kStepOverhead7b, 63073, 32768,
                startup_table_7b());
}

Profile h100x2_qwen3_32b() {
  const Model qwen3_32b{65.6e9, 31.2e9, 64, 64 * 128, 8, 128};
  const Hardware h100_tp2{kHbm, kEffectiveFlops, 2, 0.9, 8e-6};
  // KV capacity: llm-d's measured 307,328 tokens per replica = 19,208 blocks of 16.
  return derive("2xh100-qwen3-32b", qwen3_32b, h100_tp2, kStepOverhead7b, 19208, 40960,
                startup_table_32b());
}

Result<double> number(const YAML::Node& node, const std::string& key) {
  try {
    const double v = node.as<double>();
    if (!std::isfinite(v) || v < 0) return Error("profile: " + key + " must be >= 0");
    return v;
  } catch (const YAML::Exception&) {
    return Error("profile: " + key + " must be a number");
  }
}

Result<uint32_t> count(const YAML::Node& node, const std::string& key, uint32_t min) {
  try {
    const int64_t v = node.as<int64_t>();
    if (v < min || v > UINT32_MAX) {
      return Error("profile: " + key + " must be an integer >= " + std::to_string(min));
    }
    return static_cast<uint32_t>(v);
  } catch (const YAML::Exception&) {
    return Error("profile: " + key + " must be an integer");
  }
}

}  // namespace

Nanos Profile::step_time(const StepShape& s) const {
  if (s.prefill_tokens == 0 && s.decode_seqs == 0) return 0;
  const double tokens = static_cast<double>(s.prefill_tokens + s.decode_seqs);
  const double t = step_overhead_s + std::max(weight_read_s, linear_s_per_token * tokens) +
                   attention_s_per_token_ctx * s.prefill_token_ctx +
                   decode_s_per_ctx_token * static_cast<double>(s.decode_ctx_tokens);
  return std::max<Nanos>(1, static_cast<Nanos>(std::llround(t * 1e9)));
}

Nanos Profile::preprocess_time(uint64_t prompt_tokens) const {
  return static_cast<Nanos>(
      std::llround(preprocess_s_per_prompt_token * static_cast<double>(prompt_tokens) * 1e9));
}

double Profile::host_reload_s(uint32_t block_size, double bytes_per_s) const {
  const double bw = bytes_per_s > 0 ? bytes_per_s : host_bytes_per_s;
  if (bw <= 0 || kv_bytes_per_token <= 0) return 0;
  return kv_bytes_per_token * block_size / bw;
}

double Profile::disk_reload_s(uint32_t block_size, double disk_bytes_per_s_override,
                              double host_bytes_per_s_override) const {
  const double bw = disk_bytes_per_s_override > 0 ? disk_bytes_per_s_override : disk_bytes_per_s;
  if (bw <= 0 || kv_bytes_per_token <= 0) return 0;
  return kv_bytes_per_token * block_size / bw +
         host_reload_s(block_size, host_bytes_per_s_override);
}

double Profile::prefill_block_s(uint32_t block_size) const {
  return linear_s_per_token * block_size;
}

double host_block_credit(const Profile& profile, uint32_t block_size) {
  const double prefill = profile.prefill_block_s(block_size);
  if (prefill <= 0) return 0;
  return std::clamp(1.0 - profile.host_reload_s(block_size) / prefill, 0.0, 1.0);
}

double disk_block_credit(const Profile& profile, uint32_t block_size) {
  const double prefill = profile.prefill_block_s(block_size);
  if (prefill <= 0) return 0;
  return std::clamp(1.0 - profile.disk_reload_s(block_size) / prefill, 0.0, 1.0);
}

std::vector<std::string_view> builtin_profile_names() {
  return {"h100-qwen2.5-7b", "2xh100-qwen3-32b"};
}

Result<Profile> builtin_profile(std::string_view name) {
  if (name == "h100-qwen2.5-7b") return h100_qwen25_7b();
  if (name == "2xh100-qwen3-32b") return h100x2_qwen3_32b();
  std::string known;
  for (std::string_view n : builtin_profile_names()) {
    known += known.empty() ? "" : ", ";
    known += n;
  }
  return Error("unknown profile '" + std::string(name) + "' (built-in: " + known + ")");
}

Result<Profile> parse_profile_yaml(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error(std::string("profile: invalid YAML: ") + e.what());
  }
  if (!root.IsMap()) return Error("profile: expected a YAML mapping");

  Profile p = h100_qwen25_7b();
  p.name = "custom";
  if (const YAML::Node base = root["base"]) {
    std::string base_name;
    try {
      base_name = base.as<std::string>();
    } catch (const YAML::Exception&) {
      return Error("profile: base must be a profile name");
    }
    Result<Profile> b = builtin_profile(base_name);
    if (!b) return Error("profile: base: " + b.error());
    p = *b;
    p.name = "custom";
  }

  struct Field {
    const char* key;
    double* value;
  };
  const Field seconds_fields[] = {
      {"step_overhead_s", &p.step_overhead_s},
      {"weight_read_s", &p.weight_read_s},
      {"linear_s_per_token", &p.linear_s_per_token},
      {"attention_s_per_token_ctx", &p.attention_s_per_token_ctx},
      {"decode_s_per_ctx_token", &p.decode_s_per_ctx_token},
      {"preprocess_s_per_prompt_token", &p.preprocess_s_per_prompt_token},
      {"kv_bytes_per_token", &p.kv_bytes_per_token},
      {"host_bytes_per_s", &p.host_bytes_per_s},
      {"disk_bytes_per_s", &p.disk_bytes_per_s},
  };
  for (const auto& kv : root) {
    std::string key;
    try {
      key = kv.first.as<std::string>();
    } catch (const YAML::Exception&) {
      return Error("profile: keys must be strings");
    }
    const YAML::Node& value = kv.second;
    bool done = false;
    for (const Field& f : seconds_fields) {
      if (key == f.key) {
        Result<double> v = number(value, key);
        if (!v) return Error(v.error());
        *f.value = *v;
        done = true;
      }
    }
    if (done || key == "base") continue;
    if (key == "name") {
      try {
        p.name = value.as<std::string>();
      } catch (const YAML::Exception&) {
        return Error("profile: name must be a string");
      }
    } else if (key == "num_gpu_blocks" || key == "block_size" || key == "max_model_len") {
      Result<uint32_t> v = count(value, key, 1);
      if (!v) return Error(v.error());
      (key == "num_gpu_blocks" ? p.num_gpu_blocks
       : key == "block_size"   ? p.block_size
                               : p.max_model_len) = *v;
    } else if (key == "startup") {
      std::string model;
      try {
        model = value.as<std::string>();
      } catch (const YAML::Exception&) {
        return Error("profile: startup must be 7b or 32b");
      }
      const StartupTable* t = startup_table(model);
      if (!t) return Error("profile: startup must be 7b or 32b, not '" + model + "'");
      p.startup = t;
    } else {
      return Error("profile: unknown key '" + key + "'");
    }
  }
  return p;
}

Result<Profile> resolve_profile(std::string_view name_or_yaml) {
  for (std::string_view n : builtin_profile_names()) {
    if (name_or_yaml == n) return builtin_profile(n);
  }
  if (name_or_yaml.find(':') == std::string_view::npos) return builtin_profile(name_or_yaml);
  return parse_profile_yaml(name_or_yaml);
}

}  // namespace kvgate::engine
