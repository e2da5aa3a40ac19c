"""A lock holder in its own process, for tests that pause it (SIGSTOP).

usage: holder.py ENDPOINTS KEY LEASE_SECONDS

Prints `acquired TOKEN` once it holds KEY (renewed in the background),
then `lost REASON` when its lock's `lost` event fires, then `exited`.
"""

import sys

from lockd_client import Client


def main() -> int:
    endpoints, key, lease = sys.argv[1].split(","), sys.argv[2], float(sys.argv[3])
    client = Client(endpoints)
    with client.lock(key, lease=lease) as lk:
        print(f"acquired {lk.token}", flush=True)
        if not lk.lost.wait(timeout=120):
            print("still held after 120 s", flush=True)
            return 1
        print(f"lost {type(lk.lost_reason).__name__}: {lk.lost_reason}", flush=True)
    print("exited", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
