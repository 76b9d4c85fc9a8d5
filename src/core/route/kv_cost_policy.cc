// kv-cost: NVIDIA Dynamo's KV router cost, lowest wins.
//
//   cost = overlap_weight x prefill_blocks + decode_blocks
//   prefill_blocks = (prompt tokens not cached there + its active prefill tokens) / block
//   decode_blocks  = blocks its requests hold + blocks this request adds there
//
// The first term is the time to first token this endpoint would give (prefill is
// compute-bound and proportional to uncached tokens, queued prefills first); the
// second is its decode load, which sets every running request's token rate. The
// weight trades one for the other. temperature > 0 samples instead of taking the
// minimum (softmax over range-normalized costs), which spreads bursts.
//
// Tiers: a prompt block cached only in host memory (the index's cached_blocks beyond
// gpu_blocks: vLLM's CPU offloading) is not computed but loaded back, which costs a
// fraction of computing it; it counts as cpu_block_credit of a cached block (default
// kDefaultCpuBlockCredit, derived from the engine model's reload and prefill times). A
// block of that run held on disk only (the index's disk_blocks) is read from disk first
// and counts as disk_block_credit (default kDefaultDiskBlockCredit, derived the same way).
#include <algorithm>

#include "core/route/builtins.h"
#include "core/route/registry.h"

namespace kvgate::route::builtin {
namespace {

class KvCostPolicy final : public Policy {
 public:
  KvCostPolicy(double overlap_weight, double temperature, double cpu_block_credit,
               double disk_block_credit)
      : overlap_weight_(overlap_weight),
        temperature_(temperature),
        cpu_block_credit_(cpu_block_credit),
        disk_block_credit_(disk_block_credit) {}

  std::string_view name() const override { return "kv-cost"; }
  bool uses_overlap() const override { return true; }

  size_t pick(const RouteContext& ctx, std::span<Candidate> c, Rng& rng) override {
    for (Candidate& x : c) {
      const Blocks b = blocks(ctx, x);
      x.cost = overlap_weight_ * b.prefill + b.decode;
    }
    return pick_softmax(c, temperature_, rng);
  }

  void cost_terms(const RouteContext& ctx, const Candidate& x,
                  std::vector<CostTerm>& out) const override {
    const Blocks b = blocks(ctx, x);
    out.push_back({"prefill", overlap_weight_ * b.prefill});
    out.push_back({"decode", b.decode});
  }

 private:
  struct Blocks {
    double prefill = 0;  // (prompt tokens not cached there + its active prefill) / block
    double decode = 0;   // blocks its requests hold + blocks this request adds there
  };
  Blocks blocks(const RouteContext& ctx, const Candidate& x) const {
    const double bs = ctx.block_size;
    const double prompt = ctx.request.prompt_tokens;
    // Blocks only in CPU memory or on disk still have to be loaded; cpu_block_credit and
    // disk_block_credit say how much of a GPU hit such a block is worth (0: none, 1: as
    // good).
    const uint32_t lower = std::max(x.cached_blocks, x.gpu_blocks) - x.gpu_blocks;
    const uint32_t disk = std::min(x.disk_blocks, lower);
    const double cached_blocks =
        x.gpu_blocks + cpu_block_credit_ * (lower - disk) + disk_block_credit_ * disk;
    const double uncached = std::max(0.0, prompt - cached_blocks * bs);
    const double prefill_blocks =
        (uncached + static_cast<double>(x.endpoint->load.active_prefill_tokens)) / bs;
    const double new_blocks =
        ctx.request_blocks > x.active_prefix ? ctx.request_blocks - x.active_prefix : 0;
    const double decode_blocks =
        static_cast<double>(x.endpoint->load.active_decode_blocks) + new_blocks;
    return {prefill_blocks, decode_blocks};
  }

  const double overlap_weight_;
  const double temperature_;
  const double cpu_block_credit_;
  const double disk_block_credit_;
};

}  // namespace

Result<std::unique_ptr<Policy>> make_kv_cost(const PolicyConfig& config, const Registry&) {
  ParamReader p(config);
  const double weight = p.number("overlap_weight", 1.0, 0, 1e6);
  const double temperature = p.number("temperature", 0.0, 0, 1e6);
  const double credit = p.number("cpu_block_credit", kDefaultCpuBlockCredit, 0, 1);
  const double disk_credit = p.number("disk_block_credit", kDefaultDiskBlockCredit, 0, 1);
  if (Status s = p.finish(); !s) return Error(s.error());
  return std::unique_ptr<Policy>(
      std::make_unique<KvCostPolicy>(weight, temperature, credit, disk_credit));
}

}  // namespace kvgate::route::builtin
