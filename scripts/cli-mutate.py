#!/usr/bin/env python3
"""cli-mutate.py: hostile inputs through the whole command line (issue 16).

Makes N mutation cases from the repository's own inputs (example jobs, CSV schedules,
calibration profiles, reports, and command lines) and runs each through every given pipetwin
binary (typically the release build and the ASan + UBSan build). Each run is classified:

  ok-0, ok-2      exit 0, or exit 2 (bad input, with a message)
  ok-env          exit 1 that the machine explains (--backend cuda: no pipetwin-cuda, no GPU)
  signal          killed by a signal (a crash, an abort)
  sanitizer       an AddressSanitizer / UBSan / LeakSanitizer report on stderr
  internal        exit 1 with "internal error" (an escaped exception)
  exit1           exit 1 otherwise (on these inputs only a failed write would justify it)
  hang            still running after --timeout seconds (killed)
  rss             more than --rss-mb of peak memory (ru_maxrss)
  other           any other exit status

Every case that is not ok is kept under OUT/findings/<case>/ (its files, its argv, each
binary's stderr) to be replayed. The summary (counts per kind and class) is printed and
written to OUT/summary.json. Exit status: 0 when every run is ok, 1 otherwise.

  nice -n 10 scripts/cli-mutate.py -n 3000 --jobs 1 --out build/cli-mutate \\
      build/default/apps/pipetwin build/debug-asan/apps/pipetwin

Cases are deterministic: case i of --seed S is the same on every machine. Outputs are written
only inside each case's folder; the only absolute paths used are /dev/null, /dev/zero and
/dev/full (the commands refuse them as outputs).
"""
import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def glob_files(folder, suffix):
    out = []
    for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
        for n in sorted(names):
            if n.endswith(suffix):
                out.append(os.path.relpath(os.path.join(dirpath, n), ROOT))
    return sorted(out)


# Seeds: the repository's own inputs.
JOBS = [p for p in glob_files("examples", ".yaml") if "/plan/" not in p]
JOBS += glob_files("tests/exec_mpi/jobs", ".yaml") + glob_files("tests/compare/jobs", ".yaml")
SMALL_JOBS = [p for p in JOBS if "/models/" not in p and "/megatron/" not in p]
CSVS = glob_files("examples/schedules", ".csv")
VALIDATION = sorted(
    os.path.relpath(d, ROOT)
    for d in (os.path.join(ROOT, "results/validation", s, v)
              for s in ("pp2", "dp2", "tp2")
              for v in (os.listdir(os.path.join(ROOT, "results/validation", s))
                        if os.path.isdir(os.path.join(ROOT, "results/validation", s)) else []))
    if os.path.isfile(os.path.join(d, "profile.yaml")) and os.path.isfile(os.path.join(d, "job.yaml")))
REPORTS = glob_files("results/schedules", ".report.json") + glob_files("fuzz/seeds/fuzz_report", ".json")
PLANS = glob_files("examples/plan", ".yaml")

INTERESTING_NUMBERS = [
    "0", "-1", "1", "2", "3", "7", "4096", "4097", "65536", "1000000", "1000001", "2147483647",
    "2147483648", "-2147483649", "4294967296", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "1e18", "1e308", "1e309", "-1e308", "1e-320", "nan", ".nan", "inf",
    ".inf", "-.inf", "0x7fffffff", "0o777", "1_000", "+5", "5.", "1e9", "999999999", "2e6",
    "1073741824", "0.0001", "-0", "3.999999999999999999",
]
INTERESTING_TEXT = [
    "", "~", "null", "true", "yes", "[]", "{}", "[1, [2, [3]]]", "&a x", "*a", "<<: *a", "!!binary AAAA",
    "!!str 5", "'quoted'", '"\\x00"', "\x1b[31mred\x1b[0m", "tab\there", "\x7f\x01\x02", "\xff\xfe",
    "é" * 3, "A" * 5000, "csv:/etc/passwd", "csv:/dev/zero", "csv:.", "csv:", "---", "...",
    "? complex", "- item", "%YAML 1.2", "# comment",
]
OPTIONS = {
    "simulate": ["--report", "--trace", "--ascii", "--profile", "--per-pipeline-rank"],
    "schedule": ["--csv", "--format"],
    "compare": ["--out", "--predicted-trace", "--measured-trace", "--tolerance", "--title",
                "--no-plots"],
    "plan": ["--top", "--report", "--csv", "--plot", "--threads", "--emit-jobs"],
    "run": ["--backend", "--report", "--trace", "--check-reference", "--calibrate", "--test-fault"],
    "calibrate": ["--backend", "--out", "--steps", "--warmup"],
    "validate": ["--help"],
    "schedules": ["--help"],
    "presets": ["--help"],
}
WORDS = ["job.yaml", "in.csv", "profile.yaml", "p.json", "m.json", "plan.yaml", "out.json",
         "out.csv", "t.json", "t.json.gz", "dir", "dir/", "dir/x.json", "missing.yaml", ".", "",
         "-", "--", "-x", "--=", "cpu", "cuda", "compute_comms", "xml", "0.05", "5%", "-0.5",
         "hang:0", "kill:99999", "perturb:1", "/dev/null", "/dev/zero", "/dev/full",
         "job.yaml.tmp", "out.json.tmp", "\x1b]0;title\x07", "a\tb", "ünïcode"]


def mutate_bytes(rng, data):
    """Generic mutations of a byte string."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        if not data:
            data += bytes([rng.randrange(256)])
            continue
        i = rng.randrange(len(data))
        if op == 0:  # flip a byte
            data[i] = rng.randrange(256)
        elif op == 1:  # delete a range
            del data[i:i + rng.randint(1, 32)]
        elif op == 2:  # insert random bytes
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3:  # duplicate a range
            j = min(len(data), i + rng.randint(1, 200))
            data[i:i] = data[i:j] * rng.randint(1, 50)
        elif op == 4:  # truncate
            del data[i:]
        elif op == 5:  # a control character
            data[i:i] = bytes([rng.choice([0, 7, 8, 9, 10, 13, 27, 127, 255])])
        else:  # swap two ranges
            j = rng.randrange(len(data))
            a, b = sorted((i, j))
            data[a:b] = data[a:b][::-1]
    return bytes(data)


NUM_RE = re.compile(rb"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def mutate_text(rng, data):
    """Structure-aware mutations of YAML / CSV / JSON text: numbers, values, lines, keys."""
    ops = rng.choice([1, 1, 1, 2, 3])  # mostly one change: deeper paths stay reachable
    for _ in range(ops):
        op = rng.randrange(8)
        lines = data.split(b"\n")
        if op in (0, 1):  # a number to an extreme
            nums = list(NUM_RE.finditer(data))
            if nums:
                m = rng.choice(nums)
                data = data[:m.start()] + rng.choice(INTERESTING_NUMBERS).encode() + data[m.end():]
        elif op == 2:  # a value to odd text
            spots = [m.end() for m in re.finditer(rb": ", data)] or [0]
            k = rng.choice(spots)
            end = k
            while end < len(data) and data[end:end + 1] not in (b",", b"}", b"\n"):
                end += 1
            data = data[:k] + rng.choice(INTERESTING_TEXT).encode("utf-8", "surrogateescape") + data[end:]
        elif op == 3 and len(lines) > 1:  # duplicate a line (duplicate keys)
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            data = b"\n".join(lines)
        elif op == 4 and len(lines) > 1:  # delete a line
            del lines[rng.randrange(len(lines))]
            data = b"\n".join(lines)
        elif op == 5:  # a second document, or junk at the end
            data += rng.choice([b"\n---\n", b"\n...\n", b"\n---\nschedule: gpipe\n", b"\x00", b"\n]"])
        elif op == 6:  # a known line appended (an unknown or repeated key in a section)
            data += rng.choice([b"\nfrob: 1\n", b"\nmodel: {preset: tiny}\n", b"\nparallel: {pp: 4096}\n",
                                b"\nmicrobatches: 1000000\n", b"\ntraining: {global_batch: 999999999}\n",
                                b"\ncluster: {nodes: 0}\n", b"\nexecution: {timeout_s: 0}\n"])
        else:
            data = mutate_bytes(rng, data)
    return data


def argv_words(rng):
    cmd = rng.choice(list(OPTIONS))
    words = [cmd]
    positional = {"simulate": ["job.yaml"], "schedule": ["job.yaml"], "compare": ["p.json", "m.json"],
                  "plan": ["plan.yaml"], "run": ["job.yaml"], "calibrate": ["job.yaml"],
                  "validate": [], "schedules": [], "presets": []}[cmd]
    words += positional
    for _ in range(rng.randint(0, 6)):
        opt = rng.choice(OPTIONS[cmd])
        words.append(opt)
        if rng.random() < 0.8:
            words.append(rng.choice(WORDS + INTERESTING_NUMBERS[:10]))
    if rng.random() < 0.05:
        words.append("--help")
    for _ in range(rng.randint(0, 3)):  # word-level mutations
        if not words:
            break
        op = rng.randrange(5)
        i = rng.randrange(len(words))
        if op == 0:
            del words[i]
        elif op == 1:
            words.insert(i, rng.choice(WORDS))
        elif op == 2:
            words[i] = words[i] + rng.choice(["=", "=x", "x", "\x1b", " ", "/"])
        elif op == 3:
            words.insert(i, rng.choice(sum(OPTIONS.values(), [])))
        else:
            words[i], words[-1] = words[-1], words[i]
    if not words or words[0] == "validate" and "--help" not in words:
        words = ["validate", "--help"]  # validate starts mpirun processes: only its parser
    # Outputs stay in the case folder: no absolute path but /dev/{null,zero,full}, no "..".
    safe = []
    for w in words:
        if ".." in w or (w.startswith("/") and w not in ("/dev/null", "/dev/zero", "/dev/full")) \
                or "=/" in w:
            w = "x"
        safe.append(w)
    return safe


def make_case(i, seed, folder):
    """Writes case i's files into `folder`; returns (kind, argv words)."""
    rng = random.Random(seed * 1000003 + i)
    kind = rng.choice(["job", "job", "csv", "profile", "report", "argv", "argv"])
    def put(name, data):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    put("job.yaml", read("examples/schedules/1f1b.yaml"))
    for c in CSVS:  # what the example jobs' csv: schedules name
        put(os.path.basename(c), read(c))
    if kind == "job":
        src = rng.choice(SMALL_JOBS if rng.random() < 0.9 else JOBS)
        put("job.yaml", mutate_text(rng, read(src)))
        if rng.random() < 0.5:
            return kind, ["simulate", "job.yaml", "--report", "out.json", "--trace", "t.json"]
        return kind, ["schedule", "job.yaml", "--csv", "out.csv"]
    if kind == "csv":
        put("in.csv", mutate_text(rng, read(rng.choice(CSVS))))
        pp = rng.choice([1, 2, 3, 4, 4096])
        m = rng.choice([1, 4, 8, 1000000])
        put("job.yaml", f"schedule: csv:in.csv\nmicrobatches: {m}\nparallel: {{pp: {pp}}}\n"
                        f"costs: {{forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1}}\n".encode())
        return kind, rng.choice([["simulate", "job.yaml", "--report", "out.json"],
                                 ["schedule", "job.yaml", "--format", "compute_comms"]])
    if kind == "profile":
        v = rng.choice(VALIDATION)
        put("job.yaml", read(os.path.join(v, "job.yaml")))
        put("profile.yaml", mutate_text(rng, read(os.path.join(v, "profile.yaml"))))
        return kind, ["simulate", "job.yaml", "--profile", "profile.yaml", "--report", "out.json"]
    if kind == "report":
        v = rng.choice(VALIDATION)
        p, m = read(os.path.join(v, "predicted.json")), read(os.path.join(v, "measured.json"))
        if rng.random() < 0.2:
            p = read(rng.choice(REPORTS))
        if rng.random() < 0.5:
            p = mutate_text(rng, p)
        else:
            m = mutate_text(rng, m)
        put("p.json", p)
        put("m.json", m)
        return kind, ["compare", "p.json", "m.json", "--out", "cmp", "--no-plots"]
    # argv: valid inputs, mutated command lines.
    v = VALIDATION[0] if VALIDATION else None
    if v:
        put("profile.yaml", read(os.path.join(v, "profile.yaml")))
        put("p.json", read(os.path.join(v, "predicted.json")))
        put("m.json", read(os.path.join(v, "measured.json")))
    put("in.csv", read(CSVS[0]))
    put("plan.yaml", b"schedule: 1f1b\nmodel: {preset: tiny}\ntraining: {global_batch: 8}\n"
                     b"cluster: {nodes: 1}\nsearch: {tp: [1, 2], pp: [1, 2]}\n")
    os.makedirs(os.path.join(folder, "dir"), exist_ok=True)
    return kind, argv_words(rng)


# Exit 1 that the machine, not the input, explains: a build without the CUDA program, no GPU.
ENV_FAILURES = r"pipetwin: built without CUDA|no CUDA device found"
SAN_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer")


def run_one(binary, words, folder, timeout, rss_mb, asan):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "PIPETWIN_PYTHON": "/bin/true", "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    if asan:
        env["ASAN_OPTIONS"] = "detect_leaks=1:hard_rss_limit_mb=%d:abort_on_error=0" % (3 * rss_mb)
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    err_path = os.path.join(folder, "stderr-%d.txt" % abs(hash(binary)))
    def limits():
        os.nice(0)
        if not asan:  # a runaway allocation fails instead of taking the machine
            resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    start = time.monotonic()
    with open(err_path, "wb") as err, open(os.devnull, "wb") as out:
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                limits()
                os.chdir(folder)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                os.execve(binary, [binary] + words, env)
            finally:
                os._exit(127)
        hung = False
        while True:
            done, status, ru = os.wait4(pid, os.WNOHANG)
            if done == pid:
                break
            if time.monotonic() - start > timeout:
                hung = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, ru = os.wait4(pid, 0)
                break
            time.sleep(0.005)
    seconds = time.monotonic() - start
    with open(err_path, "rb") as f:
        stderr = f.read().decode("utf-8", "replace")
    rss = ru.ru_maxrss / 1024.0  # MiB
    if hung:
        cls = "hang"
    elif SAN_RE.search(stderr):
        cls = "sanitizer"
    elif os.WIFSIGNALED(status):
        cls = "signal"
    elif rss > rss_mb:
        cls = "rss"
    else:
        rc = os.WEXITSTATUS(status)
        if rc in (0, 2):
            cls = "ok-%d" % rc
        elif rc == 1 and "internal error" in stderr:
            cls = "internal"
        elif rc == 1 and re.search(ENV_FAILURES, stderr):
            cls = "ok-env"
        elif rc == 1:
            cls = "exit1"
        else:
            cls = "other"
    return {"class": cls, "seconds": round(seconds, 3), "rss_mb": round(rss, 1),
            "stderr_tail": stderr[-2000:]}


def write_summary(a, binaries, done, counts, findings, started):
    total = {}
    for kind in counts.values():
        for key, n in kind.items():
            total[key] = total.get(key, 0) + n
    summary = {"cases": done, "of": a.n, "seed": a.seed, "first": a.first, "binaries": binaries,
               "seconds": round(time.monotonic() - started), "by_kind": counts, "total": total,
               "findings": findings}
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binaries", nargs="+", help="pipetwin programs (one built with AddressSanitizer "
                    "is run with the sanitizer options and 4x the timeout)")
    ap.add_argument("-n", type=int, default=3000, help="cases (default 3000)")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--first", type=int, default=0, help="first case number (to replay one)")
    ap.add_argument("--jobs", type=int, default=1, help="cases at a time (default 1)")
    ap.add_argument("--timeout", type=float, default=30, help="seconds per run (ASan: 4x)")
    ap.add_argument("--rss-mb", type=float, default=1024)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "cli-mutate"))
    a = ap.parse_args()
    binaries = [os.path.abspath(b) for b in a.binaries]
    sanitized = {}
    for b in binaries:
        if not os.access(b, os.X_OK):
            sys.exit("cli-mutate: %s is not an executable" % b)
        with open(b, "rb") as f:
            sanitized[b] = b"__asan_init" in f.read()
    os.makedirs(os.path.join(a.out, "findings"), exist_ok=True)
    work = tempfile.mkdtemp(prefix="cli-mutate-")
    counts = {}
    findings = []
    started = time.monotonic()

    def one(i):
        folder = os.path.join(work, "case%05d" % i)
        os.makedirs(folder)
        kind, words = make_case(i, a.seed, folder)
        files = {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))
                 if os.path.isfile(os.path.join(folder, n))}
        results = []
        for b in binaries:
            asan = sanitized[b]
            r = run_one(b, words, folder, a.timeout * (4 if asan else 1), a.rss_mb, asan)
            r["binary"] = b
            results.append(r)
        bad = [r for r in results if not r["class"].startswith("ok-")]
        if bad:
            keep = os.path.join(a.out, "findings", "case%05d" % i)
            shutil.rmtree(keep, ignore_errors=True)
            os.makedirs(keep)
            for n, data in files.items():
                with open(os.path.join(keep, n), "wb") as f:
                    f.write(data)
            with open(os.path.join(keep, "case.json"), "w") as f:
                json.dump({"case": i, "seed": a.seed, "kind": kind, "argv": words,
                           "results": results}, f, indent=1)
        shutil.rmtree(folder, ignore_errors=True)
        return i, kind, words, results

    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for i, kind, words, results in pool.map(one, range(a.first, a.first + a.n)):
            for r in results:
                key = "%s %s" % (os.path.basename(os.path.dirname(os.path.dirname(r["binary"]))) or r["binary"], r["class"])
                counts.setdefault(kind, {}).setdefault(key, 0)
                counts[kind][key] += 1
                if not r["class"].startswith("ok-"):
                    findings.append({"case": i, "kind": kind, "argv": words, "binary": r["binary"],
                                     "class": r["class"], "seconds": r["seconds"], "rss_mb": r["rss_mb"],
                                     "stderr": r["stderr_tail"][-300:]})
            done = i + 1 - a.first
            if done % 100 == 0:
                # The summary so far: an interrupted campaign still reports what it ran.
                write_summary(a, binaries, done, counts, findings, started)
                print("cli-mutate: %d cases, %d findings, %.0f s" % (done, len(findings),
                                                                    time.monotonic() - started), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    total = write_summary(a, binaries, a.n, counts, findings, started)
    print(json.dumps({"cases": a.n, "total": total, "by_kind": counts}, indent=1))
    for fd in findings[:40]:
        print("FINDING case %d (%s) %s: %s %s\n  %s" % (fd["case"], fd["kind"], fd["class"],
              os.path.basename(fd["binary"]), fd["argv"], fd["stderr"].strip().splitlines()[-1:] if fd["stderr"].strip() else ""))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
