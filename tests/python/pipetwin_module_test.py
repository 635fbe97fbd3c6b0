#!/usr/bin/env python3
"""pipetwin_module_test.py PIPETWIN SOURCE_DIR: the Python module (PYTHONPATH=build/<preset>/python)
against the command line: the same report, the same programs, the same messages."""
import json
import os
import subprocess
import sys
import tempfile

import yaml

import pipetwin

pipetwin_bin, src = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def cli(*args):
    return subprocess.run([pipetwin_bin, *args], capture_output=True, text=True)


tmp = tempfile.mkdtemp()
job_path = os.path.join(src, "examples/schedules/1f1b.yaml")
with open(job_path) as f:
    job = yaml.safe_load(f)

# simulate: the report `simulate --report` writes, as dicts and lists.
report_path = os.path.join(tmp, "r.json")
r = cli("simulate", job_path, "--report", report_path)
check(r.returncode == 0, "pipetwin simulate --report exits 0")
with open(report_path) as f:
    cli_report = json.load(f)
report = pipetwin.simulate(job)
check(isinstance(report, dict), "simulate returns a dict")
check(report["iteration_time_ms"] == cli_report["iteration_time_ms"],
      f"iteration_time_ms {report['iteration_time_ms']} == CLI's {cli_report['iteration_time_ms']}")
check(report == cli_report, "the whole report equals the CLI's")
check(list(report) == list(cli_report), "the keys come in the CLI's order")
check(isinstance(report["ranks"], list) and len(report["ranks"]) == job["parallel"]["pp"],
      "one rank row per pipeline rank")

# A sweep over microbatches changes what it should.
times = [pipetwin.simulate({**job, "microbatches": m})["iteration_time_ms"] for m in (4, 8, 16)]
check(times[0] < times[1] < times[2], f"iteration time grows with microbatches: {times}")

# schedule: per-rank lists, the CLI's CSV rows, in both formats.
for fmt in ("compute_comms", "compute_only"):
    r = cli("schedule", job_path, "--format", fmt)
    rows = [line.split(",") for line in r.stdout.splitlines()]
    progs = pipetwin.schedule(job) if fmt == "compute_comms" else pipetwin.schedule(job, format=fmt)
    check(len(progs) == job["parallel"]["pp"], f"schedule({fmt}) has pp lists")
    check(progs == rows, f"schedule({fmt}) equals `pipetwin schedule --format {fmt}`")
    check(progs[0][:2] == rows[0][:2], f"schedule({fmt}) first items {progs[0][:2]} == {rows[0][:2]}")
check(pipetwin.schedule(job)[0][:2] == ["0F0", "0SEND_F0"], "compute_comms is the default")

# Bad input: ValueError with the CLI's message (the file named "<dict>").
bad = {"schedule": "1f1b", "microbatchs": 4, "costs": {"forward_ms": 1}}
bad_path = os.path.join(tmp, "typo.yaml")
with open(bad_path, "w") as f:
    yaml.safe_dump(bad, f, sort_keys=False)
r = cli("simulate", bad_path)
check(r.returncode == 2, "the CLI exits 2 on the bad key")
cli_message = r.stderr.strip().removeprefix("pipetwin: ").replace(bad_path, "<dict>")
for fn in (pipetwin.simulate, pipetwin.schedule):
    try:
        fn(bad)
        check(False, f"{fn.__name__} raises ValueError on a bad key")
    except ValueError as e:
        check(str(e) == cli_message, f"{fn.__name__}: ValueError '{e}' == CLI's '{cli_message}'")
try:
    pipetwin.simulate({**job, "parallel": {"pp": 0}})
    check(False, "pp 0 raises ValueError")
except ValueError as e:
    check("parallel.pp: must be an integer in [1, 4096], got '0'" in str(e), f"pp 0: {e}")
try:
    pipetwin.schedule(job, format="xml")
    check(False, "format='xml' raises ValueError")
except ValueError as e:
    check("compute_only or compute_comms" in str(e), f"format='xml': {e}")

# A relative csv: schedule resolves against the current directory.
csv_path = os.path.join(tmp, "s.csv")
with open(csv_path, "w") as f:
    f.write(cli("schedule", job_path).stdout)
os.chdir(tmp)
from_csv = pipetwin.simulate({**job, "schedule": "csv:s.csv"})
check(from_csv["iteration_time_ms"] == report["iteration_time_ms"],
      "csv:s.csv (relative to the current directory) gives the same iteration time")

sys.exit(1 if failures else 0)
