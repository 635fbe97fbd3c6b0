#!/usr/bin/env python3
"""docs/job-file.md lists exactly the keys the job reader accepts, section by section.

For each section the reader checks, a job with one unknown key makes `pipetwin` name the
keys it allows ("unknown key 'x' (allowed: a, b, ...)"): that list is the truth. Every
allowed key must appear (in backticks) in the doc's text for that section, and every key
that a table of the doc lists in its first column must be allowed there. The doc's YAML
examples must simulate (exit 0).

  job_reference_test.py PIPETWIN REPO_ROOT
"""
import os
import re
import subprocess
import sys
import tempfile

BASE = """schedule: 1f1b
parallel: {pp: 2}
model: {preset: gpt3-125m}
training: {global_batch: 8}
"""
ABSTRACT = """schedule: 1f1b
parallel: {pp: 2}
microbatches: 4
"""

# section -> (the doc heading whose text documents it, the command, the job text)
CASES = {
    "(top level)": ("## Top level", "simulate", BASE + "bogus_key: 1\n"),
    "(top level of a plan file)": ("## Top level", "plan",
                                   BASE + "search: {tp: [1]}\nbogus_key: 1\n"),
    "parallel": ("## `parallel:`", "simulate",
                 BASE.replace("{pp: 2}", "{pp: 2, bogus_key: 1}")),
    "costs": ("## `costs:`", "simulate", ABSTRACT + "costs: {forward_ms: 1, bogus_key: 1}\n"),
    "model": ("## `model:`", "simulate",
              BASE.replace("{preset: gpt3-125m}", "{preset: gpt3-125m, bogus_key: 1}")),
    "training": ("## `training:`", "simulate",
                 BASE.replace("{global_batch: 8}", "{global_batch: 8, bogus_key: 1}")),
    "training.overlap": ("### `training.overlap:`", "simulate",
                         BASE.replace("{global_batch: 8}",
                                      "{global_batch: 8, overlap: {bogus_key: true}}")),
    "cluster": ("## `cluster:`", "simulate", BASE + "cluster: {bogus_key: 1}\n"),
    "cluster.intra_node": ("## `cluster:`", "simulate",
                           BASE + "cluster: {intra_node: {bogus_key: 1}}\n"),
    "cluster.inter_node": ("## `cluster:`", "simulate",
                           BASE + "cluster: {inter_node: {bogus_key: 1}}\n"),
    "cluster.fabric": ("## `cluster:`", "simulate", BASE + "cluster: {fabric: {bogus_key: 1}}\n"),
    "cluster.compute": ("## `cluster:`", "simulate",
                        BASE + "cluster: {compute: {bogus_key: 1}}\n"),
    "cluster.variability": ("### `cluster.variability:`", "simulate",
                            BASE + "cluster: {variability: {distribution: none, bogus_key: 1}}\n"),
    "execution": ("## `execution:`", "simulate", BASE + "execution: {bogus_key: 1}\n"),
    "execution.stragglers": ("## `execution:`", "simulate",
                             BASE + "execution: {stragglers: {bogus_key: 1}}\n"),
    "search": ("## `search:`", "plan", BASE + "search: {bogus_key: [1]}\n"),
}


def doc_sections(text):
    """heading line -> the text up to the next heading of any level. CASES name a heading by
    its start (what follows, such as "(abstract form)", is free)."""
    out, head, lines = {}, None, []
    for line in text.splitlines():
        if line.startswith("#"):
            if head is not None:
                out[head] = "\n".join(lines)
            head, lines = line.strip(), []
        elif head is not None:
            lines.append(line)
    if head is not None:
        out[head] = "\n".join(lines)
    return out


def tokens(s):
    """The identifiers inside the backtick spans of s."""
    found = set()
    for span in re.findall(r"`([^`]*)`", s):
        found.update(t for t in re.split(r"[^A-Za-z0-9_]+", span) if t)
    return found


def first_column_keys(section_text):
    """Identifiers in backticks in the first cell of each table row (not the header)."""
    keys = set()
    for line in section_text.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or not line.startswith("| `"):
            continue
        keys |= tokens(cells[1])
    return keys


def allowed(pipetwin, command, job_text, tmp):
    path = os.path.join(tmp, "job.yaml")
    with open(path, "w") as f:
        f.write(job_text)
    r = subprocess.run([pipetwin, command, path], capture_output=True, text=True, timeout=60)
    m = re.search(r"unknown key 'bogus_key'[^(]*\(allowed: ([^)]*)\)", r.stderr)
    if r.returncode != 2 or not m:
        raise AssertionError(f"no allowed-key list (exit {r.returncode}): {r.stderr.strip()}")
    return {k.strip() for k in m.group(1).split(",")}


def main(argv):
    pipetwin, root = argv[1], argv[2]
    with open(os.path.join(root, "docs", "job-file.md")) as f:
        doc = f.read()
    sections = doc_sections(doc)
    failures = []
    documented_in = {}  # doc heading -> the union of the keys its sections allow
    with tempfile.TemporaryDirectory() as tmp:
        for section, (heading, command, job) in CASES.items():
            match = [h for h in sections if h == heading or h.startswith(heading + " ")]
            if len(match) != 1:
                failures.append(f"{section}: docs/job-file.md has {len(match)} headings "
                                f"starting '{heading}', not one")
                continue
            heading = match[0]
            keys = allowed(pipetwin, command, job, tmp)
            documented_in.setdefault(heading, set()).update(keys)
            missing = sorted(keys - tokens(sections[heading]))
            if missing:
                failures.append(f"{section}: accepted but not documented under '{heading}': "
                                + ", ".join(missing))
        examples = re.findall(r"```yaml\n(.*?)```", doc, re.S)
        if not examples:
            failures.append("docs/job-file.md has no YAML example")
        for i, text in enumerate(examples):
            path = os.path.join(tmp, f"example{i}.yaml")
            with open(path, "w") as f:
                f.write(text)
            r = subprocess.run([pipetwin, "simulate", path], capture_output=True, text=True,
                               timeout=120)
            if r.returncode != 0:
                failures.append(f"example {i + 1} does not simulate: {r.stderr.strip()}")
    for heading, keys in documented_in.items():
        extra = sorted(first_column_keys(sections[heading]) - keys)
        if extra:
            failures.append(f"'{heading}' documents keys the reader does not accept: "
                            + ", ".join(extra))
    for f in failures:
        print("FAIL", f)
    if failures:
        return 1
    print(f"PASS: {len(CASES)} sections, {sum(len(k) for k in documented_in.values())} keys")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
