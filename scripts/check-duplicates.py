#!/usr/bin/env python3
"""Checks that the crates compiled into the default `hermes` binary in more than one version are
exactly those listed, with a reason, in benches/weight/duplicates.txt (run by `.ci/run`).

A new duplicate costs binary size and build time without anyone having chosen it: CI names it so
it is aligned (a version bump, a feature) or listed with its reason. An entry whose crate is no
longer duplicated fails too, so the list stays true and shrinks as upstreams align. The same
version listed twice (once for the build host, once for the target) is not a duplicate.

It also checks the one crypto provider: ring. aws-lc-rs may only come in with Matrix (matrix-sdk
turns on reqwest's `rustls` feature, which names it); a build of every other adapter has none.

Usage: python3 scripts/check-duplicates.py
"""

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWED_FILE = ROOT / "benches" / "weight" / "duplicates.txt"
LINE = re.compile(r"^(?P<name>[A-Za-z0-9_-]+) v(?P<version>\S+)")


def duplicated() -> dict[str, set[str]]:
    tree = subprocess.run(
        ["cargo", "tree", "--locked", "-p", "hermes", "-e", "normal", "-d", "--depth", "0",
         "--target", "x86_64-unknown-linux-gnu"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    versions: dict[str, set[str]] = defaultdict(set)
    for line in tree.splitlines():
        found = LINE.match(line)
        if found:
            versions[found["name"]].add(found["version"])
    return {name: found for name, found in versions.items() if len(found) > 1}


def allowed() -> dict[str, str]:
    entries = {}
    for number, line in enumerate(ALLOWED_FILE.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, why = line.partition(":")
        if not sep or not why.strip():
            sys.exit(f"{ALLOWED_FILE.relative_to(ROOT)}:{number}: expected `crate: why`, found {line!r}")
        entries[name.strip()] = why.strip()
    return entries


def second_crypto_provider_without_matrix() -> str:
    """Who brings aws-lc-rs into a build of every adapter but Matrix (empty when nothing does)."""
    others = "telegram,discord,slack,email,webhook,api-server"
    tree = subprocess.run(
        ["cargo", "tree", "--locked", "-p", "hermes", "--no-default-features", "--features", others,
         "-e", "normal", "-i", "aws-lc-rs", "--target", "x86_64-unknown-linux-gnu"],
        cwd=ROOT, capture_output=True, text=True,
    )
    return tree.stdout.strip() if tree.returncode == 0 else ""


def main() -> int:
    provider = second_crypto_provider_without_matrix()
    if provider:
        print("aws-lc-rs is in a build without Matrix; the provider is ring everywhere we choose "
              "(src/tls.rs). Who brings it:\n" + provider, file=sys.stderr)
    found = duplicated()
    listed = allowed()
    new = sorted(set(found) - set(listed))
    gone = sorted(set(listed) - set(found))
    for name in new:
        print(f"{name} is compiled in {len(found[name])} versions ({', '.join(sorted(found[name]))}): align it "
              f"(`cargo tree -i {name}@VERSION` shows who brings each) or add `{name}: why` to "
              f"{ALLOWED_FILE.relative_to(ROOT)}", file=sys.stderr)
    for name in gone:
        print(f"{name} is no longer duplicated: remove it from {ALLOWED_FILE.relative_to(ROOT)}", file=sys.stderr)
    versions = sum(len(v) for v in found.values())
    print(f"duplicated crates: {len(found)} ({versions} versions), each listed with its reason")
    return 1 if new or gone or provider else 0


if __name__ == "__main__":
    sys.exit(main())
