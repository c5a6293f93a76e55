#!/usr/bin/env python3
"""Fixtures for TensorBoard event files (tests/fixtures/tfevents/), read by the `tensorboard`
package (PyPI) itself.

Input: metrics.jsonl (committed by hand: lines in the forms tupe-pretrain and tupe-glue log,
with nested scores, null, strings, arrays and booleans that must be left out, and extreme
values). The built `tupe-testtool tfevents` (`make tests` first; --build names the build
directory) writes events.out.tfevents.1700000000.tupe from it at fixed wall times (lib/tfevents.c,
the writer tupe-pretrain and tupe-glue use); then TensorBoard reads it:

  reader.txt   "step TAG VALUE" (%.9g) per scalar, in file order, as
               tensorboard.backend.event_processing.event_file_loader.EventFileLoader decodes
               it (the loader TensorBoard's own EventAccumulator uses), after checking the
               first record is file_version "brain.Event:2", the wall times, and that
               EventAccumulator lists every tag as a scalar with the same values
  VERSIONS     the versions used

and, for a resumed run (killed after logging past its checkpoint), from resumed.jsonl (by
hand: the same steps from 20 on, other values) `tupe-testtool tfevents --restart 20` writes
events.out.tfevents.1700000100.tupe, whose first event after file_version is a SessionLog
START at step 20. Its record is checked to be what TensorBoard's own event_pb2 encodes for
that event, and EventAccumulator over the directory holding both files (as TensorBoard reads
a run) to show every step of each tag once, the resumed file's values from step 20 on:

  resumed-reader.txt  "step TAG VALUE" per scalar as that accumulator lists them (by tag)

It also flips one byte of a record's data and checks the reader refuses the file (the masked
CRC-32C is checked). `make check` (tests/cli/tfevents.sh) rewrites the file and compares bytes,
and compares `tupe-testtool tfevents-cat` (our own decoder) with reader.txt.

    /work/venvs/hf5/bin/pip install tensorboard
    /work/venvs/hf5/bin/python tests/reference/make_tfevents_fixtures.py
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "tfevents")
EVENTS = "events.out.tfevents.1700000000.tupe"


def load(path):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util
    rows, walls = [], []
    events = list(EventFileLoader(path).Load())
    first = events[0]
    assert first.file_version == "brain.Event:2" and first.wall_time == 1700000000.0, first
    for ev in events[1:]:
        for v in ev.summary.value:
            # The loader turns simple_value into a scalar tensor (data_compat), as TensorBoard does.
            x = tensor_util.make_ndarray(v.tensor).item()
            assert v.metadata.plugin_data.plugin_name == "scalars", v
            rows.append("%d %s %.9g\n" % (ev.step, v.tag, x))
            walls.append(ev.wall_time)
    return events, rows, walls


RESUMED = "events.out.tfevents.1700000100.tupe"


def resumed(tool):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.compat.proto import event_pb2
    path = os.path.join(OUT, RESUMED)
    subprocess.run([tool, "tfevents", "--restart", "20", os.path.join(OUT, "resumed.jsonl"),
                    "-o", path], check=True)
    data = open(path, "rb").read()
    # The second record's data: the marker, byte for byte TensorBoard's encoding of it.
    n1 = int.from_bytes(data[0:8], "little")
    at = 16 + n1
    n2 = int.from_bytes(data[at:at + 8], "little")
    want = event_pb2.Event(wall_time=1700000000.125, step=20,
                           session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
    assert data[at + 12:at + 12 + n2] == want.SerializeToString(), "the START record differs"

    # What the killed run logged, then the resumed run's file: each step once, the new values.
    def numbers(name):  # {tag: {step: value}} of the top-level numbers
        out = {}
        for line in open(os.path.join(OUT, name)):
            rec = json.loads(line)
            for key, v in rec.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and key != "step":
                    out.setdefault(key, {})[rec["step"]] = v
        return out
    old, new = numbers("metrics.jsonl"), numbers("resumed.jsonl")
    # (A directory named *tfevents* would be taken for one file: the two in a run's directory.)
    with tempfile.TemporaryDirectory() as d:
        for name in (EVENTS, RESUMED):
            os.symlink(os.path.join(OUT, name), os.path.join(d, name))
        acc = EventAccumulator(d, size_guidance={"scalars": 0})
        acc.Reload()
    rows = []
    for tag in sorted(acc.Tags()["scalars"]):
        got = [(s.step, s.value) for s in acc.Scalars(tag)]
        steps = [s for s, _ in got]
        assert len(steps) == len(set(steps)), (tag, steps)
        want_tag = {s: v for s, v in old.get(tag, {}).items() if s < 20}
        want_tag.update(new.get(tag, {}))
        assert steps == sorted(want_tag), (tag, steps, sorted(want_tag))
        for s, v in got:
            assert "%.9g" % v == "%.9g" % float(__import__("numpy").float32(want_tag[s])), (tag, s, v)
            rows.append("%d %s %.9g\n" % (s, tag, v))
    with open(os.path.join(OUT, "resumed-reader.txt"), "w") as f:
        f.writelines(rows)


def main():
    ap = argparse.ArgumentParser(description="make tests/fixtures/tfevents")
    ap.add_argument("--build", help="build directory (default: the newest build/*/)")
    a = ap.parse_args()
    build = a.build or max(glob.glob(os.path.join(ROOT, "build", "*", "")), key=os.path.getmtime)
    tool = os.path.join(build, "tests", "tupe-testtool")
    path = os.path.join(OUT, EVENTS)
    subprocess.run([tool, "tfevents", os.path.join(OUT, "metrics.jsonl"), "-o", path], check=True)
    events, rows, walls = load(path)

    # What the input says, line by line: every number, nested keys joined with "/".
    want, want_walls = [], []
    for k, line in enumerate(open(os.path.join(OUT, "metrics.jsonl"))):
        rec = json.loads(line)

        def walk(prefix, o):
            for key, v in o.items():
                tag = prefix + key
                if isinstance(v, dict):
                    walk(tag + "/", v)
                elif isinstance(v, (int, float)) and not isinstance(v, bool) and tag != "step":
                    f = float(__import__("numpy").float32(v))
                    want.append("%d %s %.9g\n" % (rec["step"], tag, f))
                    want_walls.append(1700000000.0 + k + 0.25)
        walk("", rec)
    assert rows == want, (rows, want)
    assert walls == want_walls

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(path, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert sorted(tags) == sorted({r.split()[1] for r in rows}), tags
    for r in rows:
        step, tag, value = r.split()
        got = [s for s in acc.Scalars(tag) if s.step == int(step)]
        assert any("%.9g" % s.value == value for s in got), (tag, step, got)

    # A flipped data byte: the masked CRC-32C no longer matches and the reader stops there.
    data = bytearray(open(path, "rb").read())
    data[12 + 5] ^= 0x01
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, EVENTS)
        open(bad, "wb").write(bytes(data))
        try:
            n = len(load(bad)[0])
        except Exception:
            n = 0
        assert n == 0, "a corrupt first record was read (%d events)" % n

    with open(os.path.join(OUT, "reader.txt"), "w") as f:
        f.writelines(rows)
    resumed(tool)
    import tensorboard
    with open(os.path.join(OUT, "VERSIONS"), "w") as f:
        f.write("python %s\ntensorboard %s\n" % (sys.version.split()[0], tensorboard.__version__))
    print("wrote", OUT, len(rows), "scalars")


if __name__ == "__main__":
    main()
