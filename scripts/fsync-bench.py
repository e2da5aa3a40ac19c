#!/usr/bin/env python3
"""A small write and fdatasync, appending to a file or overwriting zeros
laid ahead (what the log does: docs/performance.md, "The log's padding"),
taking turns, in the directory given (the data directory's filesystem).

    scripts/fsync-bench.py [DIR] [--count 2000] [--rounds 2]
"""
import argparse
import os
import tempfile
import time


def run(directory, mode, count, size=100):
    fd, path = tempfile.mkstemp(dir=directory, prefix="fsync-bench-")
    try:
        if mode == "overwrite":
            os.write(fd, b"\0" * (count * size + 4096))
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
        buf = b"x" * size
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir", nargs="?", default=".")
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    print("| round | mode | p50 µs | p99 µs |")
    print("|---:|---|---:|---:|")
    for r in range(1, a.rounds + 1):
        for mode in ("append", "overwrite"):
            p50, p99 = run(a.dir, mode, a.count)
            print(f"| {r} | {mode} | {p50:.0f} | {p99:.0f} |")


if __name__ == "__main__":
    main()
