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
    check("compute_only, compute_comms or pipetwin" in str(e), f"format='xml': {e}")
# A dict that contains itself, or lists nested 100,000 deep, is bad input (it crashed the
# interpreter before: the conversion to YAML recursed without end).
loop = {"schedule": "1f1b"}
loop["model"] = loop
deep = []
for _ in range(100000):
    deep = [deep]
for fn, arg in ((pipetwin.simulate, loop), (pipetwin.schedule, {**job, "model": deep}),
                (pipetwin.plan, {**job, "search": {"pp": deep}})):
    try:
        fn(arg)
        check(False, f"{fn.__name__} raises ValueError on a dict nested without end")
    except ValueError as e:
        check("nested deeper than 16 levels" in str(e), f"{fn.__name__}: nested: {e}")

# A relative csv: schedule resolves against the current directory.
csv_path = os.path.join(tmp, "s.csv")
with open(csv_path, "w") as f:
    f.write(cli("schedule", job_path).stdout)
os.chdir(tmp)
from_csv = pipetwin.simulate({**job, "schedule": "csv:s.csv"})
check(from_csv["iteration_time_ms"] == report["iteration_time_ms"],
      "csv:s.csv (relative to the current directory) gives the same iteration time")

# plan: the same top layouts as `pipetwin plan --report` on a small search.
plan_file = os.path.join(tmp, "plan.yaml")
with open(plan_file, "w") as f:
    f.write("""schedule: 1f1b
model: {preset: gpt3-1.3b}
training: {global_batch: 64, micro_batch: 1}
cluster: {device: a100-sxm-80gb, gpus_per_node: 8, nodes: 2}
search: {schedule: [1f1b, zb-h1], tp: [1, 2, 4], pp: [1, 2, 4], micro_batch: [1, 2]}
""")
with open(plan_file) as f:
    plan_dict = yaml.safe_load(f)
plan_report = os.path.join(tmp, "plan.json")
r = cli("plan", plan_file, "--top", "3", "--threads", "1", "--report", plan_report)
check(r.returncode == 0, f"pipetwin plan exits 0 ({r.stderr.strip()})")
with open(plan_report) as f:
    cli_plan = json.load(f)
py_plan = pipetwin.plan(plan_dict, top=3, threads=1)
check(py_plan["evaluated"] == cli_plan["evaluated"], "plan: the same number of layouts evaluated")
check([t["iteration_time_ms"] for t in py_plan["top"]] ==
      [t["iteration_time_ms"] for t in cli_plan["top"]], "plan: the same top 3")
try:
    pipetwin.plan({**plan_dict, "search": {"tq": [1]}})
    check(False, "an unknown search key raises ValueError")
except ValueError as e:
    check("search" in str(e) and "tq" in str(e), f"search.tq: {e}")
# top and threads: the CLI's bounds.
for kw, want in ((dict(top=0), "top: must be an integer in [1, 100000], got 0"),
                 (dict(top=100001), "top: must be an integer in [1, 100000], got 100001"),
                 (dict(threads=-1), "threads: must be an integer in [0, 1024] (0: every core), got -1"),
                 (dict(threads=1025), "threads: must be an integer in [0, 1024] (0: every core), got 1025")):
    try:
        pipetwin.plan(plan_dict, **kw)
        check(False, f"plan({kw}) raises ValueError")
    except ValueError as e:
        check(str(e) == want, f"plan({kw}): {e}")
check(pipetwin.plan(plan_dict, top=100000, threads=1024)["evaluated"] == cli_plan["evaluated"],
      "plan at the bounds (top 100000, threads 1024) evaluates the same layouts")

sys.exit(1 if failures else 0)
