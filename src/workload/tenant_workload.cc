#include "workload/tenant_workload.h"

#include <algorithm>

#include "core/common/yaml_reader.h"
#include "workload/workload_yaml.h"

namespace kvgate::workload {
namespace {

class TenantWorkload final : public Workload {
 public:
  explicit TenantWorkload(std::vector<std::unique_ptr<Workload>> parts) : parts_(std::move(parts)) {
    StageInfo all;
    double qps = 0;
    for (uint32_t i = 0; i < parts_.size(); ++i) {
      for (const StageInfo& s : parts_[i]->stages()) {
        all.end = std::max(all.end, s.end);
        qps = std::max(qps, s.qps);
      }
      peeked_.push_back(take(i));
    }
    all.qps = qps;
    stages_.push_back(all);
  }

  std::optional<WorkloadRequest> next() override {
    size_t best = parts_.size();
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (!peeked_[i]) continue;
      if (best == parts_.size() || peeked_[i]->arrival < peeked_[best]->arrival) best = i;
    }
    if (best == parts_.size()) return std::nullopt;
    std::optional<WorkloadRequest> out = std::move(peeked_[best]);
    peeked_[best] = take(static_cast<uint32_t>(best));
    return out;
  }

  std::optional<WorkloadRequest> follow_up(const WorkloadRequest& finished,
                                           Nanos finished_at) override {
    if (finished.tenant >= parts_.size()) return std::nullopt;
    auto r = parts_[finished.tenant]->follow_up(finished, finished_at);
    if (r) {
      r->tenant = finished.tenant;
      r->stage = 0;
    }
    return r;
  }

  const std::vector<StageInfo>& stages() const override { return stages_; }

 private:
  std::optional<WorkloadRequest> take(uint32_t i) {
    auto r = parts_[i]->next();
    if (r) {
      r->tenant = i;
      r->stage = 0;
    }
    return r;
  }

  std::vector<std::unique_ptr<Workload>> parts_;
  std::vector<std::optional<WorkloadRequest>> peeked_;
  std::vector<StageInfo> stages_;
};

}  // namespace

Result<std::unique_ptr<Workload>> make_tenant_workload(const WorkloadSpec& spec, uint64_t seed,
                                                       const ReadFile& read_file) {
  if (spec.tenant_workloads.empty() || spec.tenant_workloads.size() != spec.tenants.size()) {
    return Error("tenants: need at least one tenant, each with a workload");
  }
  std::vector<std::unique_ptr<Workload>> parts;
  for (size_t i = 0; i < spec.tenant_workloads.size(); ++i) {
    WorkloadSpec w = spec.tenant_workloads[i];
    w.vocab_size = spec.vocab_size;
    auto part = make_workload(w, seed * 0x9e3779b97f4a7c15ULL + 0x74656e0000ULL + i, read_file);
    if (!part) return Error("tenants[" + std::to_string(i) + "]: " + part.error());
    parts.push_back(std::move(*part));
  }
  return std::unique_ptr<Workload>(new TenantWorkload(std::move(parts)));
}

Status parse_tenants(const YAML::Node& node, const std::string& base_dir, WorkloadSpec& out,
                     std::string_view file, const std::string& where) {
  const YamlReader y(file);
  if (!node || !node.IsSequence() || node.size() == 0) {
    return y.error(node, where, "expected a non-empty list");
  }
  out.kind = WorkloadSpec::Kind::kTenants;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node t = node[i];
    const std::string wt = where + "[" + std::to_string(i) + "]";
    KVGATE_TRY(y.expect_map(t, wt, {"name", "weight", "criticality", "deadline_ms", "workload"}));
    TenantSpec spec;
    KVGATE_TRY(y.read(t, "name", spec.name, wt));
    if (spec.name.empty()) return y.error(t, wt + ".name", "required");
    for (const TenantSpec& other : out.tenants) {
      if (other.name == spec.name) {
        return y.error(t["name"], wt + ".name", "duplicate \"" + spec.name + "\"");
      }
    }
    KVGATE_TRY(y.read(t, "weight", spec.weight, wt));
    if (!(spec.weight > 0)) return y.error(t["weight"], wt + ".weight", "must be > 0");
    std::string criticality;
    KVGATE_TRY(y.read(t, "criticality", criticality, wt));
    if (!criticality.empty()) {
      auto c = route::parse_criticality(criticality);
      if (!c) {
        return y.error(t["criticality"], wt + ".criticality",
                       "expected critical, standard or sheddable");
      }
      spec.criticality = *c;
    }
    double deadline_ms = 0;
    KVGATE_TRY(y.read(t, "deadline_ms", deadline_ms, wt));
    if (deadline_ms < 0) return y.error(t["deadline_ms"], wt + ".deadline_ms", "must be >= 0");
    spec.deadline = static_cast<Nanos>(deadline_ms * 1e6);
    const YAML::Node tw = t["workload"];
    if (!tw) return y.error(t, wt + ".workload", "required");
    auto w = parse_workload(tw, base_dir, file, wt + ".workload");
    if (!w) return Error(w.error());
    if (w->kind == WorkloadSpec::Kind::kTenants) {
      return y.error(tw, wt + ".workload", "cannot nest tenants");
    }
    out.tenants.push_back(std::move(spec));
    out.tenant_workloads.push_back(std::move(*w));
  }
  return {};
}

}  // namespace kvgate::workload
