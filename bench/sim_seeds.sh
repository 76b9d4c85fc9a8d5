# Sourced by the bench/sim_*.bench.sh studies that run one scenario over several seeds.
# sim_seeds_csv CSV COLUMN...: runs `$BIN sim $SCENARIO --seed S` for each S in $SEEDS
# (outputs under $work/seed-S) and writes CSV: a header `seed,policy,COLUMN...`, then a
# row per seed and policy from that run's summary.csv. COLUMN=DEFAULT takes DEFAULT when
# the summary has no such column (a report writes some columns only when a policy needs
# them); a plain COLUMN must be there. Returns 1, with the run's log, when a run fails.
sim_seeds_csv() {
  local csv=$1 seed dir
  shift
  python3 -c 'import csv, sys; csv.writer(sys.stdout, lineterminator="\n").writerow(
    ["seed", "policy"] + [c.split("=")[0] for c in sys.argv[1:]])' "$@" >"$csv"
  for seed in $SEEDS; do
    dir="$work/seed-$seed"
    nice -n 10 "$BIN" sim "$SCENARIO" --seed "$seed" --no-progress --out "$dir" >"$dir.log" 2>&1 || {
      tail -20 "$dir.log" >&2
      return 1
    }
    python3 - "$dir/summary.csv" "$seed" "$@" >>"$csv" <<'PY'
import csv, sys
out = csv.writer(sys.stdout, lineterminator="\n")
for row in csv.DictReader(open(sys.argv[1], newline="")):
    cells = [sys.argv[2], row["policy"]]
    for column in sys.argv[3:]:
        name, _, default = column.partition("=")
        cells.append(row.get(name, default) if "=" in column else row[name])
    out.writerow(cells)
PY
  done
}
