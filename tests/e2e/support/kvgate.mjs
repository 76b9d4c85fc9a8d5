// Runs the kvgate binary (KVGATE_BIN, else build/asan/kvgate) with stdin input.
import {spawn} from 'node:child_process';
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

// Processes the tests start (engines, gateways), stopped by stop_started().
const started = [];

// Starts `kvgate ARGS` and resolves with the first group of `pattern` on its stdout
// (default: the URL it announces it listens on), once `ready` (when given) was printed
// too; rejects if it exits or takes 20 s.
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
        resolve(m[1]);
      }
    });
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${args[0]} exited ${code}: ${err}`)); });
  });
}

// SIGTERM to every process start_kvgate started, the last first; resolves once all exited.
export async function stop_started() {
  for (const p of started.splice(0).reverse()) {
    if (p.exitCode !== null || p.signalCode !== null) continue;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await exited;
  }
}
