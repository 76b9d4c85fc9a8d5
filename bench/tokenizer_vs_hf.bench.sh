#!/usr/bin/env bash
# Side-by-side encode throughput: kvgate's tokenizer vs the Hugging Face tokenizers
# library (Rust, through the @anush008/tokenizers Node addon), same corpora, same run,
# single thread, one ~4 KB document per call, median of the passes, CPU time on both
# sides (the machine may be shared). Prints the ratio per family and corpus: the five
# fixture families on the path kvgate chooses, and Qwen3 / Llama 3 also on the general
# (PCRE2) path; then each family's 7,200-token chat prompt rendered by kvgate (its Jinja
# engine, and the hand-written fast path where one exists) and encoded: p50/p99 of wall and
# thread CPU time; then each tokenizer's load time and memory.
# Needs: scripts/bootstrap, and build/release/tokenizer_bench (make bench builds it:
#   cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVGATE_BENCH=ON
#   cmake --build build/release --target tokenizer_bench)
# Env: PASSES (default 5) passes per corpus on each side.
set -euo pipefail
cd "$(dirname "$0")/.."
passes=${PASSES:-5}
corpora=out/bench/corpora
mkdir -p out/bench
node bench/tokenizer_corpora.mjs "$corpora"
bench=build/release/tokenizer_bench
[[ -x $bench ]] || { echo "tokenizer_vs_hf: $bench missing (build the release benches)" >&2; exit 2; }
models="qwen3 llama3 deepseek_v3 gemma3 llama2"
for model in $models; do
  node bench/tokenizer_hf.mjs ".deps/fixtures/$model/tokenizer.json" "$corpora" "$passes" \
    >"out/bench/tokenizer_hf_$model.json"
done
for model in $models qwen3_general llama3_general; do
  KVGATE_BENCH_CORPORA=$corpora "$bench" --benchmark_filter="BM_Encode/$model/" \
    --benchmark_repetitions="$passes" --benchmark_report_aggregates_only=true \
    --benchmark_format=json >"out/bench/tokenizer_kvgate_$model.json" 2>/dev/null
done
node - <<'JS'
const fs = require('fs');
console.log('model          corpus   HF MB/s   HF tok/s   kvgate MB/s   kvgate tok/s   ratio');
let worst = Infinity;
for (const model of ['qwen3', 'llama3', 'deepseek_v3', 'gemma3', 'llama2', 'qwen3_general',
                     'llama3_general']) {
  const hf = JSON.parse(fs.readFileSync(`out/bench/tokenizer_hf_${model.replace('_general', '')}.json`));
  const kv = JSON.parse(fs.readFileSync(`out/bench/tokenizer_kvgate_${model}.json`)).benchmarks;
  for (const corpus of ['prose', 'code', 'cjk', 'mixed']) {
    const b = kv.find((x) => x.name === `BM_Encode/${model}/${corpus}_median`);
    const mb = b.bytes_per_second / 1e6, tok = b.tokens_per_s;
    const ratio = mb / hf[corpus].mb_per_s;
    worst = Math.min(worst, ratio);
    console.log(`${model.padEnd(14)} ${corpus.padEnd(8)} ${hf[corpus].mb_per_s.toFixed(2).padStart(7)} ` +
      `${(hf[corpus].tokens_per_s / 1e6).toFixed(3).padStart(9)}M ${mb.toFixed(1).padStart(12)} ` +
      `${(tok / 1e6).toFixed(2).padStart(13)}M ${ratio.toFixed(1).padStart(7)}x`);
  }
}
console.log(`lowest ratio: ${worst.toFixed(1)}x (target >= 10x)`);
JS
KVGATE_BENCH_CORPORA=$corpora "$bench" --benchmark_filter='BM_ChatPromptP99|BM_Load/' \
  --benchmark_repetitions="$passes" --benchmark_report_aggregates_only=true --benchmark_format=json 2>/dev/null >out/bench/tokenizer_prompts.json
node - <<'JS'
// Google Benchmark writes a counter it could not compute (an aggregate of RSS deltas that
// include a 0) as a bare NaN, which is not JSON: read it as null.
const text = require('fs').readFileSync('out/bench/tokenizer_prompts.json', 'utf8');
const b = JSON.parse(text.replace(/:\s*-?nan\b/gi, ': null')).benchmarks;
const fix = (v, w) => (v === null || v === undefined ? '-' : v.toFixed(1)).padStart(w);
console.log('\nchat prompt       renderer    tokens   p50 us   p99 us   CPU p50 us   CPU p99 us');
// Medians over the passes of each run's p50 / p99 (1,000 prompts a run).
for (const x of b.filter((x) => x.name.startsWith('BM_ChatPromptP99/') && x.aggregate_name === 'median')) {
  const [, m, r] = x.name.split('/');
  console.log(`${m.padEnd(17)} ${r.padEnd(9)} ${String(x.prompt_tokens).padStart(8)} ` +
    `${x.p50_us.toFixed(0).padStart(8)} ${x.p99_us.toFixed(0).padStart(8)} ` +
    `${x.cpu_p50_us.toFixed(0).padStart(12)} ${x.cpu_p99_us.toFixed(0).padStart(12)}`);
}
console.log('\ntokenizer      load ms   held MiB   heap MiB   RSS growth MiB');
for (const m of ['qwen3', 'llama3', 'deepseek_v3', 'gemma3', 'llama2']) {
  const l = b.find((x) => x.name.startsWith(`BM_Load/${m}/`) && x.aggregate_name === 'median');
  console.log(`${m.padEnd(13)} ${l.real_time.toFixed(0).padStart(8)} ${l.held_MiB.toFixed(1).padStart(10)} ` +
    `${fix(l.heap_MiB, 10)} ${fix(l.rss_growth_MiB, 16)}`);
}
JS
