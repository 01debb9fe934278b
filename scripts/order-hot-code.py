#!/usr/bin/env python3
"""Regenerate link/hot-code.order: the functions the gateway runs, in the order the linker
should place them (build.rs hands the file to the linker).

Why: the kernel maps a binary's code 64 kB at a time around each page it touches, so a start-up
that runs 1.5 MB of code scattered over 12 MB of text keeps ~7.5 MB resident. Placed together,
the code the gateway runs occupies a few contiguous megabytes.

How: builds the binary users run (`cargo build --release --bin hermes`; or takes an already-built
one with `--binary PATH`), copies it aside, and profiles that copy with callgrind in three phases,
each a benchmark that runs it as its gateway (`HERMES_BENCH_BINARY`, with `HERMES_BENCH_WRAPPER`
putting callgrind in front):
  1. Telegram idle: the Telegram benchmark stopped once its Telegram-only gateway has gone idle
     (`HERMES_BENCH_STOP_AFTER_IDLE=1`): the core every gateway runs, and Telegram;
  2. all idle: `tests/peers/run.sh cargo bench --bench weight -- --profile-idle`, the gateway with
     all seven adapters connected (Matrix and email to the real Synapse and Dovecot/Postfix that
     tests/peers/run.sh starts), from start-up until it has idled 10 s and exited on SIGTERM;
  3. answering: the whole Telegram benchmark (`cargo bench --bench telegram`: answering
     messages, bursts, pacing, Discord and Slack too);
and writes the functions of phase 1, then those only phase 2 ran, then those only phase 3 ran,
each group sorted by name (which keeps a module's functions together). The layers matter: with
phases 1 and 2 as one sorted group, the core's functions sat among the other adapters' and a
Telegram-only gateway idled at 14.5 MB instead of ~11.5. Names are the linker's (mangled), so the file matches
binaries built by the same rustc from the same Cargo.lock; names that no longer exist are
skipped by the linker, so a stale file costs memory, never correctness. The names carry hashes
that cargo derives from each crate's dependencies and features, so regenerate after changing
rustc, Cargo.lock or any Cargo.toml (a new dependency of hermes-adapter made every hermes crate's
names stale: idle RSS 6.4 → 9.9 MB), or after large changes: `python3 scripts/order-hot-code.py`.
The benchmarks' own build of `hermes` is not profiled: its dev-dependencies unify other features
into shared crates (tokio's test-util, …), which gives those crates other hashes, so an order taken
from it matched under half of the release binary's names.

The benchmark harnesses are built in the dev profile (`cargo bench --profile dev`): only the
profiled gateway has to be the release build, and the dev harness reuses the test build, where a
release one would be a 15-minute fat-LTO build of its own. Nothing in them asserts on speed, so
their slower fakes only lengthen the run.

How long (2 cores, November 2026): the Telegram idle phase under a minute, the all-idle phase ~1 minute (all seven up in ~8 s under
callgrind, Matrix's login and key upload included); the answering phase ~15 minutes, most of it
the Telegram benchmark's 230 sequential Discord and 230 Slack messages, whose replies those
adapters' default send budgets space 2.5 s and 1 s apart. Plus `cargo build --release` (~15
minutes) without `--binary`.

Needs valgrind (Debian: `apt install valgrind`) and the test peers (tests/peers/install.sh, which
tests/peers/run.sh runs first).

`python3 scripts/order-hot-code.py --check BINARY` (run by `.ci/run` on `cargo build --release`'s binary) fails
when fewer than 90 % of the listed functions exist in BINARY, so a stale order is caught by CI,
not months later by someone measuring memory.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER_FILE = ROOT / "link" / "hot-code.order"
NAME = re.compile(r"^c?fn=\(\d+\) (.+)$")
# The benchmark harnesses run in the dev profile: they reuse the test build (no 15-minute fat-LTO
# build of their own), and the gateway they run is the release binary anyway.
BENCH = ["cargo", "bench", "--profile", "dev", "--locked"]
PEERS = ROOT / "tests" / "peers" / "run.sh"


# Below this share of listed functions present in the binary, the order is stale.
FRESH_SHARE = 0.9


def check(binary: Path) -> int:
    listed = [line for line in ORDER_FILE.read_text().splitlines() if line and not line.startswith("#")]
    if not listed:
        print(f"{ORDER_FILE.relative_to(ROOT)} lists no function", file=sys.stderr)
        return 1
    present = defined_functions(binary)
    found = sum(1 for name in listed if name in present)
    share = found / len(listed)
    print(f"hot-code order: {found} of {len(listed)} listed functions ({share:.0%}) are in {binary}")
    if share < FRESH_SHARE:
        print(
            f"the order is stale (under {FRESH_SHARE:.0%}): regenerate it with `python3 scripts/order-hot-code.py` "
            "(needs valgrind and the test peers, ~15 minutes) and commit link/hot-code.order",
            file=sys.stderr,
        )
        return 1
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Regenerate (or --check) link/hot-code.order.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", metavar="BINARY", type=Path, help="fail when the order is stale for BINARY")
    mode.add_argument(
        "--binary", metavar="PATH", type=Path, help="profile this release binary instead of running `cargo build --release`"
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.check is not None:
        return check(args.check)
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind is not installed (Debian: apt install valgrind)", file=sys.stderr)
        return 1
    built = args.binary if args.binary is not None else build_release()
    if not built.is_file():
        print(f"no binary at {built}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as out:
        # A copy: a later `cargo build --release` may write over the original mid-run.
        binary = Path(out) / "hermes"
        shutil.copy2(built, binary)
        defined = defined_functions(binary)
        profiler = Profiler(valgrind, Path(out), binary)
        telegram_idle = profiler.run("telegram-idle", [*BENCH, "--bench", "telegram"], {"HERMES_BENCH_STOP_AFTER_IDLE": "1"})
        idle = profiler.run("idle", [str(PEERS), *BENCH, "--bench", "weight", "--", "--profile-idle", "--binary", str(binary)])
        answering = profiler.run("answering", [*BENCH, "--bench", "telegram"])
    return write_order([telegram_idle & defined, idle & defined, answering & defined])


def build_release() -> Path:
    """The binary users run, as `cargo build --release` makes it."""
    subprocess.run(["cargo", "build", "--release", "--locked", "--bin", "hermes"], cwd=ROOT, check=True)
    return Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "hermes"


def write_order(phases: list[set[str]]) -> int:
    """Each phase's functions that no earlier phase ran, each group sorted by name."""
    if not phases[0]:
        print("callgrind recorded no function of the hermes binary; nothing written", file=sys.stderr)
        return 1
    groups: list[list[str]] = []
    seen: set[str] = set()
    for ran in phases:
        groups.append(sorted(ran - seen))
        seen |= ran
    header = [
        "# Generated by scripts/order-hot-code.py: do not edit. The functions the gateway runs idle",
        "# with Telegram alone, then idle with every adapter, then while answering; the linker places",
        "# them first, in this order.",
    ]
    ORDER_FILE.parent.mkdir(exist_ok=True)
    ORDER_FILE.write_text("\n".join(header + [name for group in groups for name in group]) + "\n")
    counts = ", then ".join(str(len(group)) for group in groups)
    print(f"{ORDER_FILE.relative_to(ROOT)}: {counts} functions (Telegram idle, all idle, answering)")
    return 0


class Profiler:
    """Runs a benchmark with every gateway it spawns under callgrind, one dump per process."""

    def __init__(self, valgrind: str, out: Path, binary: Path):
        self.valgrind = valgrind
        self.out = out
        self.binary = binary

    def run(self, phase: str, command: list[str], extra_env: dict[str, str] | None = None) -> set[str]:
        """The functions (mangled names) the gateways of `command` ran."""
        wrapper = f"{self.valgrind} --tool=callgrind --demangle=no --callgrind-out-file={self.out}/{phase}.%p"
        env = dict(os.environ, HERMES_BENCH_WRAPPER=wrapper, HERMES_BENCH_BINARY=str(self.binary), **(extra_env or {}))
        print(f"order-hot-code: {phase} phase: {' '.join(command)}", flush=True)
        started = time.monotonic()
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        dumps = sorted(self.out.glob(f"{phase}.*"))
        if not dumps:
            raise SystemExit(f"order-hot-code: the {phase} phase left no callgrind profile (was the gateway killed?)")
        names = functions_in(dumps) & defined_functions(self.binary)
        minutes = (time.monotonic() - started) / 60
        runs = f"{len(dumps)} gateway run{'s' if len(dumps) > 1 else ''}"
        print(f"order-hot-code: {phase} phase: {minutes:.1f} min, {runs}, {len(names)} functions of hermes", flush=True)
        return names


def functions_in(dumps: list[Path]) -> set[str]:
    names: set[str] = set()
    for dump in dumps:
        for line in dump.read_text(errors="replace").splitlines():
            found = NAME.match(line)
            if found:
                names.add(found.group(1))
    return names


def defined_functions(binary: Path) -> set[str]:
    listing = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True, check=True).stdout
    return {parts[2] for parts in (line.split() for line in listing.splitlines()) if len(parts) == 3 and parts[1] in "tTwW"}


if __name__ == "__main__":
    sys.exit(main())
