"""The test executables of a `cargo test --no-run --message-format=json`
build (its JSON messages on stdin), one per line as

    NAME<TAB>PACKAGE-DIR<TAB>EXECUTABLE

where NAME is the package's directory (relative to the workspace root,
the first argument), a colon and the target's name (`tests:cluster`,
`host:lockd`). scripts/test.sh runs each as `cargo test` would: in its
package's directory.
"""

import json
import os
import sys

seen = set()
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    if not msg.get("profile", {}).get("test"):
        continue  # a binary the tests start, not a test harness
    exe = msg["executable"]
    if exe in seen:
        continue
    seen.add(exe)
    package_dir = os.path.dirname(msg["manifest_path"])
    package = os.path.relpath(package_dir, sys.argv[1])
    print(f"{package}:{msg['target']['name']}\t{package_dir}\t{exe}")
