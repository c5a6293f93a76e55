#!/usr/bin/env python3
"""TensorBoard's own reader over a run directory's event files: every scalar step once.

    check_tfevents_resume.py RUN_DIR/tensorboard [--marker-only]

Reads the directory with tensorboard.backend.event_processing's EventAccumulator (purging
orphaned data, as TensorBoard does: a SessionLog START discards what earlier files hold from
its step on) and exits 1 when a tag holds a step twice. With --marker-only, also reads the
files with purging off and reports how many duplicates the START marker alone removed (0
when tupe cut the files back; more for files it did not cut, such as a copy of the killed
run's files beside the resumed run's new one).
Not part of make check: tests/cli/pretrain.sh checks the cut with tupe-testtool, and
tests/cli/tfevents.sh the marker's bytes against make_tfevents_fixtures.py's fixture, which
TensorBoard's reader was shown to honour."""
import collections
import sys

from tensorboard.backend.event_processing import event_accumulator as ea


def steps(path, purge):
    acc = ea.EventAccumulator(path, size_guidance={ea.SCALARS: 0}, purge_orphaned_data=purge)
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def main():
    path = sys.argv[1]
    bad = 0
    for tag, s in sorted(steps(path, True).items()):
        dup = [k for k, n in collections.Counter(s).items() if n > 1]
        if dup:
            print(f"{tag}: steps {dup[:5]} more than once")
            bad = 1
    if "--marker-only" in sys.argv[2:]:
        raw = steps(path, False)
        extra = sum(len(s) - len(set(s)) for s in raw.values())
        print(f"without purging: {extra} duplicate scalars")
    print("each step once" if not bad else "duplicates")
    return bad


if __name__ == "__main__":
    sys.exit(main())
