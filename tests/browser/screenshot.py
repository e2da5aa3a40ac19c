"""Take docs/console.png: a 3-node cluster of target/release/lockd, some
lock traffic for the sparklines, a few held locks, and the console of a
the leader in headless Chromium. Run by scripts/console-screenshot.sh."""

import argparse
import pathlib
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from devserver import DevServer  # noqa: E402
from harness import ROOT, Cluster, chrome, http, wait_for  # noqa: E402


def traffic(addr, stop):
    """Acquire and release one key after another until stopped."""
    i = 0
    while not stop.is_set():
        key = f"bench/k{i % 8}"
        code, body = http(addr, "POST", f"/v1/locks/{key}/acquire", {"lease_ms": 5000, "wait_ms": 1000})
        if code == 200:
            http(addr, "POST", f"/v1/locks/{key}/release", {"token": body["token"]})
        i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs/console.png"))
    ap.add_argument("--from-file", action="store_true", help="serve host/ui/console.html through devserver.py")
    ap.add_argument("--seconds", type=float, default=45, help="traffic before the picture")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(tmp, 3)
        stop = threading.Event()
        driver = None
        try:
            leader = cluster.leader()
            laddr = cluster.nodes[leader].addr
            for key, lease in (("db/primary", 600_000), ("jobs/nightly", 300_000), ("jobs/reindex", 90_000)):
                code, body = http(laddr, "POST", f"/v1/locks/{key}/acquire", {"lease_ms": lease})
                assert code == 200, (code, body)
            workers = [threading.Thread(target=traffic, args=(laddr, stop), daemon=True) for _ in range(4)]
            for w in workers:
                w.start()
            # The leader's console: lock events are counted where they commit.
            addr = laddr
            if a.from_file:
                addr = DevServer(ROOT / "host/ui/console.html", addr).addr
            driver = chrome(1440, 1000)
            driver.get(f"http://{addr}/ui")
            wait_for("the members", lambda: len(driver.find_elements("css selector", "#members tbody tr[data-id]")) == 3)
            end = time.monotonic() + a.seconds
            while time.monotonic() < end:   # traffic runs; the page gathers points
                time.sleep(0.5)
            # Crop to the page's height.
            h = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1440, min(max(h, 600), 2000))
            wait_for("a fresh update", lambda: driver.execute_script(
                "return Date.now() - Number(document.getElementById('updated').dataset.at || 0) < 1500"))
            pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(a.out)
            print(f"wrote {a.out}")
        finally:
            stop.set()
            if driver:
                driver.quit()
            cluster.close()


if __name__ == "__main__":
    main()
