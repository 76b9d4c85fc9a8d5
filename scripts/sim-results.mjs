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
  const lines = text.split('\n');
  const keep = lines[0].split(',').map((h) => !machine(h));
  for (const line of lines) {
    process.stdout.write(line.split(',').filter((_, i) => keep[i] !== false).join(',') + '\n');
  }
}
