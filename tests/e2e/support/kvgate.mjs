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
