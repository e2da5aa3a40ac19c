#!/usr/bin/env python3
"""A small write and fdatasync, appending to a file or overwriting zeros
laid ahead (what the log does: docs/performance.md, "The log's padding"),
taking turns, in the directory given (the data directory's filesystem).
With `--writers N`, N processes overwrite their own files at once, as the
three nodes of a cluster on one machine do when they share one disk.

    scripts/fsync-bench.py [DIR] [--count 2000] [--rounds 2] [--writers 1]
"""
import argparse
import multiprocessing
import os
import tempfile
import time


def run(directory, mode, count, size=100, start=None):
    fd, path = tempfile.mkstemp(dir=directory, prefix="fsync-bench-")
    try:
        if mode == "overwrite":
            os.write(fd, b"\0" * (count * size + 4096))
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
        buf = b"x" * size
        if start is not None:
            start.wait()
        took = []
        for _ in range(count):
            t = time.perf_counter()
            os.write(fd, buf)
            os.fdatasync(fd)
            took.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    took.sort()
    return took[count // 2] * 1e6, took[count * 99 // 100] * 1e6


def _writer(args):
    directory, count, start = args
    return run(directory, "overwrite", count, start=start)


def together(directory, count, writers):
    """p50 and p99 (the median over the writers) of `writers` processes
    overwriting at once."""
    with multiprocessing.Manager() as m:
        start = m.Barrier(writers)
        with multiprocessing.Pool(writers) as pool:
            out = pool.map(_writer, [(directory, count, start)] * writers)
    p50s = sorted(o[0] for o in out)
    p99s = sorted(o[1] for o in out)
    return p50s[writers // 2], p99s[writers // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir", nargs="?", default=".")
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--writers", type=int, default=1)
    a = p.parse_args()
    print("| round | mode | p50 µs | p99 µs |")
    print("|---:|---|---:|---:|")
    for r in range(1, a.rounds + 1):
        for mode in ("append", "overwrite"):
            p50, p99 = run(a.dir, mode, a.count)
            print(f"| {r} | {mode} | {p50:.0f} | {p99:.0f} |")
        if a.writers > 1:
            p50, p99 = together(a.dir, a.count, a.writers)
            print(f"| {r} | overwrite, {a.writers} writers at once | {p50:.0f} | {p99:.0f} |")


if __name__ == "__main__":
    main()
