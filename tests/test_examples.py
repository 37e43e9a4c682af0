"""Smoke tests of the example scripts: every ``examples/*.py`` runs with ``--quick``.

Each script runs in a fresh interpreter, in a temporary working directory (where
the scripts save their plots), with the non-interactive Agg backend. A quick run
takes 10-20 s on 2 cores.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES_DIR.glob("*.py"))

# Lines (substrings) each known example must print, and the plots it must save.
EXPECTED = {
    "adult_calibration.py": {
        "lines": ["UCI Adult:", "dense errors (default)", "emcee, diagonal", "last_iterate",
                  "calibration RMSE"],
        "plots": [],
    },
    "linear_credible_intervals.py": {
        "lines": [
            "90% credible intervals",
            "noise-aware interval",
            "naive interval",
            "coef[0]",
            "intercept",
            "noise_variance",
            "noise-aware:",
            "naive:",
            "plot saved to",
        ],
        "plots": ["linear_credible_intervals.png"],
    },
    "grid_search_privacy.py": {
        "lines": [
            "cross-validation results",
            "best (refitted) by calibration:",
            "WARNING: every fit spends privacy budget",
            "TOTAL privacy spent by the whole search: epsilon =",
            "plot saved to",
        ],
        "plots": ["grid_search_privacy.png"],
    },
    "arviz_export.py": {
        "lines": [
            "raw UCI Adult:",
            "[skdpvi] accounting: noise multiplier sigma=",
            "[skdpvi] post-processing: inference='emcee'",
            "coef[age]",
            "coef[sex_Male] - coef[sex_Female]: mean",
            "InferenceData groups: posterior, post_processing",
            "post-processing chains (emcee, 32 walkers): ESS bulk min",
            "plot saved to",
        ],
        "plots": ["arviz_export_intervals.png", "arviz_export_trace.png"],
    },
    "correlated_features.py": {
        "lines": [
            "simulations: 6 features (rho 0.7)",
            "calibration on the same simulations (a calibrated method: TARP RMSE",
            "default ",
            "mean_field ",
            "decorrelation=0.1 ",
            "90% ellipsoids",
            "plot saved to",
        ],
        "plots": ["correlated_features.png"],
    },
    "tarp_study.py": {
        "lines": [
            "joint TARP coverage RMSE",
            "exact          prior",
            "exact          posterior",
            "last_iterate   prior",
            "last_iterate   posterior",
            "marginal TARP coverage RMSE per parameter",
            "90% central intervals covering the truth",
            "noise_variance",
            "plot saved to",
        ],
        "plots": ["tarp_study.png"],
    },
}


def test_examples_are_found():
    names = {path.name for path in SCRIPTS}
    assert set(EXPECTED) <= names, f"missing examples: {set(EXPECTED) - names}"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[path.name for path in SCRIPTS])
def test_example_quick_run(script, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    # One torch/BLAS thread per process: on a busy machine oversubscribed
    # threads make DP-SGD steps an order of magnitude slower.
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=tmp_path,
        check=True,
        env=env,
        timeout=300,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    out = proc.stdout
    assert out.strip(), f"{script.name} printed nothing"
    expected = EXPECTED.get(script.name, {"lines": [], "plots": []})
    for line in expected["lines"]:
        assert line in out, f"{script.name}: {line!r} not in output:\n{out}"
    for plot in expected["plots"]:
        path = tmp_path / plot
        assert path.is_file() and path.stat().st_size > 0, f"{plot} was not saved"
        assert str(path.resolve()) in out, f"{script.name} did not print the plot path"
