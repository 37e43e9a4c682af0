"""Print the benchmark results in benchmarks/results/*.json as reStructuredText tables.

Run: python benchmarks/report.py > /tmp/tables.rst   (then paste into doc/results.rst)
"""

import json
import os

from _common import RESULTS_DIR

PAPER = {
    "table1": {"gamma_exponential": 0.023, "beta_bernoulli": 0.016, "dirichlet_categorical": 0.020},
    "table2": {"0.1": 0.036, "0.3": 0.035, "1.0": 0.027},
    "table3": {"0.1": 0.061, "0.3": 0.026, "1.0": 0.024},
}


def load(name):
    path = os.path.join(RESULTS_DIR, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def rst_table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = "  ".join("=" * w for w in widths)
    out = [line, "  ".join(str(h).ljust(w) for h, w in zip(header, widths)), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out + [line])


def z_rows(cells):
    """Per-coordinate z-scores of every method: ranges over the coordinates."""
    header = ["cell", "method", "z mean (range)", "z sd (range)", "last coordinate: z mean / sd",
              "in spec"]
    rows = []
    for k, cell in cells.items():
        for m, z in cell.get("z", {}).items():
            mean, sd = z["mean"], z["sd"]
            ok = all(abs(x) <= 0.2 for x in mean) and all(0.85 <= x <= 1.15 for x in sd)
            rows.append([k, m, f"{min(mean):+.2f} to {max(mean):+.2f}",
                         f"{min(sd):.2f} to {max(sd):.2f}",
                         f"{mean[-1]:+.2f} / {sd[-1]:.2f}", "yes" if ok else "no"])
    return rst_table(header, rows)


def tarp_rows(cells, paper):
    header = ["method"] + [f"{k} (posterior ref.)" for k in cells] + [f"{k} (prior ref.)" for k in cells]
    methods = list(next(iter(cells.values()))["rows"])
    rows = []
    for m in methods:
        row = [m]
        for scheme in ("posterior", "prior"):
            for k, cell in cells.items():
                r = cell["rows"][m][scheme]
                row.append(f"{r['rmse']:.3f} ± {r['se']:.3f}")
        rows.append(row)
    if paper:
        rows.append(["paper, NA-DPVI (NUTS)"] + [f"{paper[k]:.3f}" for k in cells]
                    + ["–"] * len(cells))
    return rst_table(header, rows)


def main():
    for name, key in (("table1_expfam", "table1"), ("table2_linear", "table2"),
                      ("table2_linear_d5_n1000", None), ("table2_linear_d20_rho0.5", None)):
        data = load(name)
        if data:
            print(f"\n{name}: K={data['n_sim']} simulations, T={data['steps']}\n")
            if "floor" in data:
                f = data["floor"]
                print(f"A perfectly calibrated method would get {f['mean']:.3f} "
                      f"(90 % range {f['q05']:.3f}-{f['q95']:.3f}) with this K.\n")
            cells = data["cells"]
            if key == "table2":
                cells = {k: cells[k] for k in sorted(cells, key=float)}
            print(tarp_rows(cells, PAPER.get(key)))
            print("\nPer-coordinate z-scores ((posterior mean - truth) / posterior sd):\n")
            print(z_rows(cells))
            print("\nseconds per cell:", {k: round(v["seconds"]) for k, v in cells.items()},
                  "clipped:", {k: round(v.get("clipped", 0), 3) for k, v in cells.items()},
                  "ConvergenceWarning:",
                  {k: round(v.get("convergence_warning", 0), 3) for k, v in cells.items()})
    data = load("table3_adult")
    if data:
        print(f"\ntable3_adult: {data['reps']} repetitions, T={data['steps']}\n")
        cells = data["cells"]
        header = ["method"] + [f"eps={k} cal. RMSE" for k in cells] \
            + [f"eps={k} Brier" for k in cells] + [f"eps={k} accuracy" for k in cells]
        rows = []
        for m in next(iter(cells.values()))["methods"]:
            row = [m]
            for metric in ("cal_rmse", "brier", "accuracy"):
                for k, cell in cells.items():
                    mean, sd = cell["methods"][m][metric]
                    digits = 4 if metric == "brier" else 3
                    row.append(f"{mean:.{digits}f} ± {sd:.{digits}f}")
            rows.append(row)
        rows.append(["paper, NA-DPVI (NUTS)"] + [f"{PAPER['table3'][k]:.3f}" for k in cells]
                    + ["–"] * (2 * len(cells)))
        print(rst_table(header, rows))
        print("\nseconds per cell:", {k: round(v["seconds"]) for k, v in cells.items()},
              "clipped:", {k: round(v["clipped"], 4) for k, v in cells.items()})


if __name__ == "__main__":
    main()
