// The kvgate binary (KVGATE_BIN, else build/asan/kvgate) for the e2e tests: run_kvgate runs
// it with stdin input; start_kvgate, start_engines and start_gateway start the processes
// stop_started stops (kill_started stops one of them before that).
import {execFileSync, spawn} from 'node:child_process';
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';

const root = process.env.KVGATE_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../../..');
export const bin = process.env.KVGATE_BIN ?? path.join(root, 'build/asan/kvgate');

export function run_kvgate(args, input) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, args, {stdio: ['pipe', 'pipe', 'pipe']});
    const out = [], err = [];
    p.stdout.on('data', (d) => out.push(d));
    p.stderr.on('data', (d) => err.push(d));
    p.on('error', reject);
    p.on('close', (code) => {
      if (code !== 0) reject(new Error(`kvgate ${args.join(' ')} exited ${code}: ${Buffer.concat(err)}`));
      else resolve(Buffer.concat(out).toString('utf8'));
    });
    p.stdin.end(input);
  });
}

// Processes the tests start (engines, gateways), stopped by stop_started(); and each by
// what start_kvgate resolved with, for kill_started().
const started = [];
const started_by_value = new Map();

// Starts `kvgate ARGS` and resolves with the first group of `pattern` on its stdout
// (default: the URL it announces it listens on), or all its groups when it has several,
// once `ready` (when given) was printed too; rejects if it exits or takes 20 s.
export function start_kvgate(args, ready, pattern = /listening on (http:\/\/[^\s]+)/) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, args, {stdio: ['ignore', 'pipe', 'pipe']});
    started.push(p);
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not start: ${out} ${err}`)), 20000);
    p.stderr.on('data', (d) => { err += d; });
    p.stdout.on('data', (d) => {
      out += d;
      const m = out.match(pattern);
      if (m && (!ready || out.includes(ready))) {
        clearTimeout(timer);
        const value = m.length > 2 ? m.slice(1) : m[1];
        started_by_value.set(Array.isArray(value) ? value[0] : value, p);
        resolve(value);
      }
    });
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${args[0]} exited ${code}: ${err}`)); });
  });
}

// Starts `count` simulated engines (`kvgate engine`: qwen-sim, time 100 times faster,
// then the `extra` arguments) one after another; resolves with their URLs, in order.
export async function start_engines(count, extra = []) {
  const urls = [];
  for (let i = 0; i < count; i++) {
    urls.push(await start_kvgate(['engine', '--port', '0', '--time-scale', '0.01', '--model', 'qwen-sim', ...extra],
      'kvgate engine ready'));
  }
  return urls;
}

// The temporary folders start_gateway made (stop_started removes them).
const made_dirs = [];

// Writes `config` (YAML) as gateway.yaml in `dir` (default: a new temporary folder) and
// starts `kvgate serve` on it. With `tenant`, a key of that tenant is added to keys.yaml
// there first (`keys_file: keys.yaml` in `config`). Resolves with {base, key}: the URL
// the gateway announces (`pattern`, as start_kvgate's) and the key (undefined without);
// with `admin` (the config has an `admin:` section), {base, key, admin}: the admin API's
// URL too.
export async function start_gateway(config, {tenant, dir, pattern, admin} = {}) {
  if (!dir) {
    dir = mkdtempSync(path.join(tmpdir(), 'kvgate-e2e-'));
    made_dirs.push(dir);  // removed by stop_started()
  }
  let key;
  if (tenant) {
    key = execFileSync(bin, ['keys', 'add', '--tenant', tenant, '--file', path.join(dir, 'keys.yaml')],
      {stdio: ['ignore', 'pipe', 'ignore']}).toString().trim();
  }
  const file = path.join(dir, 'gateway.yaml');
  writeFileSync(file, config);
  if (admin) {
    const [base, admin_url] = await start_kvgate(['serve', file], undefined,
      /listening on (http:\/\/\S+)\n[\s\S]*admin API on (http:\/\/\S+)\n/);
    return {base, key, admin: admin_url};
  }
  const base = await start_kvgate(['serve', file], undefined, pattern);
  return {base, key};
}

// Sends `signal` (default SIGKILL: a crash) to the process start_kvgate resolved with
// `value` (an engine's URL); resolves once it exited. stop_started() then skips it.
export async function kill_started(value, signal = 'SIGKILL') {
  const p = started_by_value.get(value);
  if (!p) throw new Error(`kill_started: no process started as ${value}`);
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill(signal);
  await exited;
}

// SIGTERM to every process start_kvgate started, the last first; resolves once all exited.
export async function stop_started() {
  started_by_value.clear();
  for (const p of started.splice(0).reverse()) {
    if (p.exitCode !== null || p.signalCode !== null) continue;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await exited;
  }
  for (const dir of made_dirs.splice(0)) rmSync(dir, {recursive: true, force: true});
}
