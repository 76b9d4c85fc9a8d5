// The Grafana dashboard (deploy/grafana/kvgate.json) and the recording rules and alerts
// (deploy/prometheus/kvgate-rules.yml) against a real Prometheus: Debian's `prometheus`,
// started here on a loopback port, scraping `kvgate serve` and two `kvgate engine`s every
// second while clients load them. Every expression of every panel, recording rule and
// alert goes through Prometheus' HTTP API and must parse and return data, except those
// listed below with the reason they may be empty; every metric they name is one the
// gateway or the engines export; killing an engine fires KvgateEndpointDown.
//
// Prometheus loads a copy of the rules whose every `for:` is 1s (the expressions are the
// file's own), so an alert fires within seconds of its condition.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bin, kill_started, start_gateway, start_kvgate, stop_started } from './support/kvgate.mjs';

const root = process.env.KVGATE_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../..');
const prometheus_bin = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';
const dashboard_file = path.join(root, 'deploy/grafana/kvgate.json');
const rules_file = path.join(root, 'deploy/prometheus/kvgate-rules.yml');

// What the dashboard's variables become in the queries: the test's pool, and a rate window
// of 10 scrapes (Grafana's $__rate_interval is at least 4 scrape intervals).
const variables = { pool: 'main', __rate_interval: '10s' };

// Series that do not exist until what they count happens. Killing engine A makes it
// happen: expressions over these may be empty under load and must have data after the kill.
const after_the_kill = {
  kvgate_upstream_errors_total: 'no exchange with an engine fails while both run',
  kvgate_upstream_retries_total: 'no request is sent again while both engines answer',
  kvgate_circuit_breaker_open: 'the gauge appears when a breaker first opens',
};
// ... and ones this test never makes happen: expressions over them may stay empty.
const never_here = {
  kvgate_flow_refused_total: 'flow control refuses nothing: max_requests 1000 is never reached',
  kvgate_stream_migrations_total: 'the pool has no migration: section',
  kvgate_pd_hop_failures_total: 'the pool is not disaggregated (no prefill endpoint)',
  kvgate_chat_template_fallbacks_total: 'the load sends completions, not chat requests',
  kvgate_engine_tokenize_total: 'the pool routes on approximate tokens, not the engine fallback',
};
// Every alert, by when its condition holds here (an alert's expression is its condition:
// empty while it does not hold).
const alerts_under_load = {
  KvgateKvEventGaps: 'engine B withholds every 7th KV event batch (--kv-events-drop-every)',
  KvgateKvEventsLost: 'engine B has no replay endpoint: its withheld batches are lost',
  KvgateTenantBudgetExhausted: 'tenant capped sends more than its requests_per_minute',
};
const alerts_after_the_kill = {
  KvgateEndpointDown: 'the gateway cannot scrape the killed engine',
  KvgateScrapeTargetDown: 'Prometheus cannot scrape the killed engine',
  KvgateCircuitBreakerOpen: 'requests routed to the killed engine open its breaker',
};
const alerts_never_here = {
  KvgatePoolDown: 'engine B stays up',
  KvgateEndpointMetricsStale: 'scrapes here fail all or nothing (the killed engine is KvgateEndpointDown, which this alert leaves out)',
  KvgateQueueGrowing: 'the engines keep up: fewer than 10 requests wait',
  KvgateAutoscalerAtMax: 'demand stays within max_replicas',
  KvgateRateLimitStoreFailing: 'the in-memory rate-limit store does not fail',
  KvgateHighErrorRate: 'retries keep the 5xx answers under 5%',
};

let dir;
let engine_a;
let engine_b;
let base;
let prometheus;
let keys;
let load;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts `kvgate engine` with its KV events on an ephemeral port; resolves with
// {url, publisher}.
async function start_engine(extra = []) {
  const announced = await start_kvgate(
    ['engine', '--port', '0', '--time-scale', '0.01', '--model', 'qwen-sim',
      '--kv-events-endpoint', 'tcp://127.0.0.1:*', ...extra],
    'kvgate engine ready', /(listening on http:\/\/\S+\s+kvgate engine kv events on tcp:\/\/\S+)/);
  const [, url, publisher] = announced.match(/(http:\/\/\S+)\s[\s\S]*?(tcp:\/\/\S+)/);
  return { url, publisher, announced };
}

const host_port = (url) => new URL(url).host;

// A key for `tenant` and its keys-file entry (only the SHA-256 is stored).
function make_key(tenant, limits) {
  const key = `kvg-${randomBytes(24).toString('hex')}`;
  const sha256 = createHash('sha256').update(key).digest('hex');
  const entry = `  - {sha256: ${sha256}, tenant: ${tenant}${limits ? `, limits: ${limits}` : ''}}\n`;
  return { key, entry };
}

function free_port() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// One Prometheus on 127.0.0.1:`port` (0: the kernel picks, read from its log). Resolves
// with {process, url} once it is ready, or null when it must be tried again (the port was
// taken, or its log did not say which port it got).
function launch_prometheus(config_file, data_dir, port) {
  return new Promise((resolve, reject) => {
    const p = spawn(prometheus_bin, [
      `--config.file=${config_file}`, `--storage.tsdb.path=${data_dir}`,
      `--web.listen-address=127.0.0.1:${port}`, '--storage.tsdb.retention.time=1h',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    let url = port ? `http://127.0.0.1:${port}` : undefined;
    let done = false;
    const finish = (value, error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (error) reject(error);
      else resolve(value);
    };
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      finish(undefined, new Error(`prometheus did not get ready in 30 s:\n${log}`));
    }, 30000);
    p.stderr.on('data', (d) => {
      if (done) return;
      log += d;
      // Prometheus 2.x and 3.x both log the bound address: msg="Listening on" address=...
      const m = log.match(/msg="Listening on".*?address=(?:\[[^\]]*\]|[\d.]+):(\d+)/);
      if (m && m[1] !== '0') url = `http://127.0.0.1:${m[1]}`;
      if (/Server is ready to receive web requests/.test(log)) {
        if (url) finish({ process: p, url });
        else {
          p.kill('SIGKILL');
          finish(null);
        }
      }
    });
    p.on('exit', (code, signal) => {
      if (/address already in use/.test(log)) finish(null);
      else finish(undefined, new Error(`prometheus exited (${code ?? signal}):\n${log}`));
    });
    p.on('error', (e) => finish(undefined, e));
  });
}

async function start_prometheus(config_file) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = attempt === 0 ? 0 : await free_port();
    const started = await launch_prometheus(config_file, path.join(dir, `tsdb-${attempt}`), port);
    if (started) return started;
  }
  throw new Error('prometheus: no port after 5 attempts');
}

// GET Prometheus' `pathname`, or POST `form` to it (queries: no URL length limit).
async function api(pathname, form) {
  const r = await fetch(`${prometheus.url}${pathname}`, form ? {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form),
    signal: AbortSignal.timeout(10000),
  } : { signal: AbortSignal.timeout(10000) });
  return r.json();
}

// Runs `expr` now; the vector (or the error Prometheus gave).
async function query(expr) {
  const body = await api('/api/v1/query', { query: expr });
  assert.equal(body.status, 'success', `${expr}\n-> ${body.errorType}: ${body.error}`);
  return body.data.result;
}

// Clients of two tenants until stop(): streamed completions whose prompts share four
// long prefixes (so the engines' prefix caches hit), a few whole ones, one stream in ten
// abandoned after its first chunk (a client that goes away: a long one, so the gateway
// sees it go before the answer ends).
function start_load(workers = 3) {
  let running = true;
  const prefixes = Array.from({ length: 4 }, (_, p) =>
    Array.from({ length: 160 }, (_, i) => `p${p}w${i}`).join(' '));
  let n = 0;
  const one = async () => {
    const i = n++;
    const capped = i % 10 === 3;
    const stream = i % 7 !== 0;
    const abandon = stream && i % 10 === 5;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 15000);
    try {
      const r = await fetch(`${base}/v1/completions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${capped ? keys.capped.key : keys.load.key}`,
        },
        body: JSON.stringify({
          model: 'qwen-sim',
          prompt: `${prefixes[i % prefixes.length]} question ${i}`,
          max_tokens: abandon ? 1000 : 12,
          stream,
        }),
        signal: controller.signal,
      });
      if (abandon && r.body) {
        const reader = r.body.getReader();
        await reader.read();
        controller.abort();
      } else {
        await r.arrayBuffer();
      }
    } catch {
      // Aborted, or the killed engine's stream: the metrics count it.
    } finally {
      clearTimeout(timer);
    }
  };
  const worker = async () => {
    while (running) {
      await one();
      await sleep(10);
    }
  };
  const all = Promise.all(Array.from({ length: workers }, worker));
  return async () => {
    running = false;
    await all;
  };
}

// Every panel's targets (rows' nested panels too): [{where, expr}].
function dashboard_targets(dashboard) {
  const out = [];
  const walk = (panels) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) {
        out.push({ where: `panel "${p.title}" ${t.refId} (${t.legendFormat})`, expr: t.expr, panel: p });
      }
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  return out;
}

function substitute(expr) {
  const out = expr.replace(/\$\{?(\w+)\}?/g, (whole, name) => {
    assert.ok(name in variables, `unknown variable ${whole} in ${expr}`);
    return variables[name];
  });
  return out;
}

// The metric names an expression selects: kvgate_* and vllm:* families, and the
// recording rules' level:metric:operations names.
function metric_names(expr) {
  const bare = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  return [...new Set(bare.match(/[a-zA-Z_:][a-zA-Z0-9_:]*/g) ?? [])]
    .filter((n) => n.startsWith('kvgate_') || n.startsWith('vllm:') || n.includes(':'));
}

// Metric names in a Prometheus text exposition: every family's samples (histograms as
// _bucket, _sum and _count).
function exported_names(text) {
  const names = new Set();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(m[1]);
    if (m[2] === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m[1] + s);
    if (m[2] === 'counter' && !m[1].endsWith('_total')) names.add(`${m[1]}_total`);
  }
  for (const m of text.matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/gm)) names.add(m[1]);
  return names;
}

// The expressions of the dashboard and of the rules Prometheus loaded, each with the
// reason it may be empty under load (`may_be_empty`) and whether the kill must fill it
// (`after_kill`).
let expressions;
let rules;

function classify(where, expr, alert) {
  if (alert) {
    if (alert in alerts_under_load) return { where, expr };
    if (alert in alerts_after_the_kill) return { where, expr, may_be_empty: alerts_after_the_kill[alert], after_kill: true };
    assert.ok(alert in alerts_never_here, `alert ${alert} is in none of the test's lists`);
    return { where, expr, may_be_empty: alerts_never_here[alert] };
  }
  const names = metric_names(expr);
  const never = names.find((n) => n in never_here);
  if (never) return { where, expr, may_be_empty: never_here[never] };
  const kill = names.find((n) => n in after_the_kill);
  if (kill) return { where, expr, may_be_empty: after_the_kill[kill], after_kill: true };
  return { where, expr };
}

// Polls every expression of `list` until it returns data, up to `deadline_ms` in all;
// fails listing those still empty.
async function expect_data(list, deadline_ms) {
  const deadline = Date.now() + deadline_ms;
  let empty = list;
  while (true) {
    const still = [];
    for (const e of empty) {
      if ((await query(e.expr)).length === 0) still.push(e);
    }
    empty = still;
    if (empty.length === 0 || Date.now() > deadline) break;
    await sleep(1000);
  }
  assert.deepEqual(empty.map((e) => `${e.where}: ${e.expr}`), [], 'expressions without data');
}

before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  assert.ok(existsSync(prometheus_bin), `${prometheus_bin} not found: run scripts/bootstrap (Debian package prometheus)`);
  dir = mkdtempSync(path.join(tmpdir(), 'kvgate-prometheus-'));
  engine_a = await start_engine();
  engine_b = await start_engine(['--kv-events-drop-every', '7']);
  keys = { load: make_key('load'), capped: make_key('capped', '{requests_per_minute: 3}') };
  writeFileSync(path.join(dir, 'keys.yaml'), `keys:\n${keys.load.entry}${keys.capped.entry}`);
  ({ base } = await start_gateway(`listeners: [{address: 127.0.0.1, port: 0}]
keys_file: keys.yaml
circuit_breaker: {failures: 3, open_ms: 5000}
pools:
  main:
    router: {policy: kv-cost, overlap: approx}
    flow_control: {max_requests: 1000, max_wait_s: 30}
    autoscale:
      signal: waiting
      target: 2
      min_replicas: 1
      max_replicas: 4
      interval: 1s
      window: 10s
    endpoints:
      - url: ${engine_a.url}
        kv_events: {publisher: ${engine_a.publisher}}
      - url: ${engine_b.url}
        kv_events: {publisher: ${engine_b.publisher}}
models:
  - {name: qwen-sim, pool: main}
`, { dir }));
  // The rules as in deploy/, every `for:` 1s.
  const rules_copy = path.join(dir, 'kvgate-rules.yml');
  writeFileSync(rules_copy, readFileSync(rules_file, 'utf8').replace(/^(\s+)for: \S+$/gm, '$1for: 1s'));
  const config = path.join(dir, 'prometheus.yml');
  writeFileSync(config, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [${rules_copy}]
scrape_configs:
  - job_name: kvgate
    static_configs: [{targets: ['${host_port(base)}']}]
  - job_name: inference-engines
    static_configs:
      - targets: ['${host_port(engine_a.url)}', '${host_port(engine_b.url)}']
        labels: {pool: main}
`);
  load = start_load();
  prometheus = await start_prometheus(config);
});

after(async () => {
  if (load) await load();
  if (prometheus && prometheus.process.exitCode === null && prometheus.process.signalCode === null) {
    const exited = new Promise((r) => prometheus.process.once('exit', r));
    prometheus.process.kill('SIGTERM');
    await exited;
  }
  await stop_started();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the dashboard has a prometheus datasource variable and a pool variable', () => {
  const dashboard = JSON.parse(readFileSync(dashboard_file, 'utf8'));
  const vars = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v]));
  assert.equal(vars.datasource.type, 'datasource');
  assert.equal(vars.datasource.query, 'prometheus');
  assert.equal(vars.pool.type, 'query');
  const targets = dashboard_targets(dashboard);
  assert.ok(targets.length > 40, `${targets.length} targets`);
  for (const t of targets) {
    assert.equal(t.panel.datasource.uid, '${datasource}', t.where);
    assert.match(t.expr, /\S/, t.where);
  }
});

test('Prometheus loads every rule of deploy/, and every rule evaluates without error', async () => {
  const text = readFileSync(rules_file, 'utf8');
  const in_file = (text.match(/^\s+- (record|alert):/gm) ?? []).length;
  const deadline = Date.now() + 30000;
  while (true) {
    const body = await api('/api/v1/rules');
    assert.equal(body.status, 'success');
    rules = body.data.groups.flatMap((g) => g.rules.map((r) => ({ ...r, group: g.name })));
    if (rules.length === in_file && rules.every((r) => r.health !== 'unknown')) break;
    assert.ok(Date.now() < deadline, `rules loaded: ${rules.length} of ${in_file}, evaluated: ${rules.filter((r) => r.health !== 'unknown').length}`);
    await sleep(500);
  }
  for (const r of rules) {
    assert.equal(r.health, 'ok', `${r.name}: ${r.lastError}`);
    if (r.type === 'alerting') {
      assert.equal(r.duration, 1, `${r.name} has a for:`);
      assert.match(r.labels.severity ?? '', /^(critical|warning|info)$/, `${r.name} severity`);
      assert.ok(r.annotations.summary && r.annotations.description, `${r.name} annotations`);
    }
  }
  const alerts = rules.filter((r) => r.type === 'alerting').map((r) => r.name).sort();
  assert.deepEqual(alerts, Object.keys({ ...alerts_under_load, ...alerts_after_the_kill, ...alerts_never_here }).sort(),
    'every alert is in one of the test\'s lists');
  const dashboard = JSON.parse(readFileSync(dashboard_file, 'utf8'));
  expressions = [
    ...dashboard_targets(dashboard).map((t) => classify(t.where, substitute(t.expr))),
    ...rules.map((r) => classify(`${r.type} rule ${r.name}${r.labels?.quantile ? ` ${r.labels.quantile}` : ''}`, r.query,
      r.type === 'alerting' ? r.name : undefined)),
  ];
});

test('every metric named in deploy/ is one the gateway or the engines export', async () => {
  assert.ok(expressions, 'the rules test ran');
  const gateway = await (await fetch(`${base}/metrics`)).text();
  const engine = await (await fetch(`${engine_a.url}/metrics`)).text();
  const known = new Set([...exported_names(gateway), ...exported_names(engine)]);
  const recorded = new Set(rules.filter((r) => r.type === 'recording').map((r) => r.name));
  const unknown = [];
  for (const e of expressions) {
    for (const n of metric_names(e.expr)) {
      const ok = n.startsWith('kvgate_') || n.startsWith('vllm:') ? known.has(n) : recorded.has(n);
      if (!ok) unknown.push(`${n} (${e.where})`);
    }
  }
  assert.deepEqual(unknown, []);
  // The dashboard's pool variable: label_values(METRIC, pool).
  const dashboard = JSON.parse(readFileSync(dashboard_file, 'utf8'));
  const pool_var = dashboard.templating.list.find((v) => v.name === 'pool');
  const [, metric, label] = pool_var.definition.match(/^label_values\((\w+),\s*(\w+)\)$/);
  const deadline = Date.now() + 30000;
  let values;
  do {
    if (values) await sleep(500);
    values = (await api(`/api/v1/label/${label}/values?match[]=${encodeURIComponent(metric)}`)).data;
  } while (values.length === 0 && Date.now() < deadline);
  assert.deepEqual(values, ['main']);
});

test('every expression parses and returns data under load, but those listed', { timeout: 120000 }, async () => {
  assert.ok(expressions, 'the rules test ran');
  for (const e of expressions) await query(e.expr);  // each parses and runs
  await expect_data(expressions.filter((e) => !e.may_be_empty), 60000);
});

test('KvgateEndpointDown fires when an engine is killed; the failure panels fill in', { timeout: 120000 }, async () => {
  assert.ok(expressions, 'the rules test ran');
  await kill_started(engine_a.announced);
  const deadline = Date.now() + 60000;
  let firing = [];
  while (true) {
    const body = await api('/api/v1/alerts');
    assert.equal(body.status, 'success');
    firing = body.data.alerts.filter((a) => a.state === 'firing');
    if (firing.some((a) => a.labels.alertname === 'KvgateEndpointDown' &&
        a.labels.endpoint === engine_a.url && a.labels.pool === 'main')) break;
    assert.ok(Date.now() < deadline,
      `KvgateEndpointDown not firing 60 s after the kill; firing: ${JSON.stringify(firing.map((a) => a.labels))}`);
    await sleep(500);
  }
  assert.ok(!firing.some((a) => a.labels.alertname === 'KvgateEndpointDown' && a.labels.endpoint === engine_b.url),
    'engine B is up');
  await expect_data(expressions.filter((e) => e.after_kill), 60000);
});
