"""Copies the three commands out of a wheel's scripts into a folder.

    python packages/wheel-binaries.py WHEEL DEST

The wheel's scripts are the stripped release binaries maturin built, so the npm platform package
and the plain binary archive ship the very files pip installs (on Windows, with `.exe`). Fails
when one of the three is missing.
"""

import os
import sys
import zipfile

NAMES = ("fake-instance", "fake-device", "harness")

wheel, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
found = set()
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        parts = info.filename.split("/")
        if len(parts) == 3 and parts[0].endswith(".data") and parts[1] == "scripts":
            target = os.path.join(dest, parts[2])
            with z.open(info) as src, open(target, "wb") as dst:
                dst.write(src.read())
            os.chmod(target, 0o755)
            found.add(parts[2].removesuffix(".exe"))
missing = [name for name in NAMES if name not in found]
if missing:
    sys.exit(f"wheel-binaries: {os.path.basename(wheel)} has no {', '.join(missing)}")
