// Prints a simulator result file without what measures the machine rather than the
// simulation (how much faster than real time it ran: `speedup*` fields and columns), so
// that two runs compare byte for byte. Used by scripts/sim-identical.
//   node scripts/sim-results.mjs FILE(.json|.csv)
import { readFileSync } from 'node:fs';

const file = process.argv[2];
const text = readFileSync(file, 'utf8');
const machine = (name) => name.startsWith('speedup');
if (file.endsWith('.json')) {
  const strip = (v) => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).filter(([k]) => !machine(k)).map(([k, x]) => [k, strip(x)]));
    }
    return v;
  };
  process.stdout.write(JSON.stringify(strip(JSON.parse(text)), null, 1) + '\n');
} else {
  // RFC 4180: a field in double quotes may hold commas (a run named "on, late_binding
  // any"); split outside quotes and keep each field's text as written.
  const fields = (line) => {
    const out = [];
    let start = 0;
    let quoted = false;
    for (let i = 0; i < line.length; i++) {
      if (line[i] === '"') quoted = !quoted;
      else if (line[i] === ',' && !quoted) {
        out.push(line.slice(start, i));
        start = i + 1;
      }
    }
    out.push(line.slice(start));
    return out;
  };
  const lines = text.split('\n');
  const keep = fields(lines[0]).map((h) => !machine(h));
  for (const line of lines) {
    process.stdout.write(fields(line).filter((_, i) => keep[i] !== false).join(',') + '\n');
  }
}
