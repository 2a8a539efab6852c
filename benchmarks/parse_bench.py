"""Parse-and-print and structured-view throughput of ptxkit's front end.

For each sample (and a synthetic file of at least 20 MB built from them) this prints:
the time to only read the file (the anchor), parse + print throughput, the throughput
of building the structured view of every statement (``Module.check()``), and, where
ptxas exists, the ratio of parse + print time to ``ptxas -arch=sm_90a`` on the file.

Run: ``python benchmarks/parse_bench.py [--megabytes 20] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import ptxkit

ROOT = Path(__file__).resolve().parent.parent


def best_time(action, repeat: int) -> float:
    """Seconds per call of `action()`: the best of `repeat` rounds, each round long
    enough (>= 50 ms, by calling it several times) for the clock to resolve."""
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            action()
        elapsed = time.perf_counter() - start
        if elapsed >= 0.05:
            break
        calls *= 4
    best = elapsed / calls
    for _ in range(repeat - 1):
        start = time.perf_counter()
        for _ in range(calls):
            action()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def synthetic_module(samples: list[Path], megabytes: float) -> str:
    """Many renamed copies of every sample function (and debug sections), one module."""
    header = ".version 8.0\n.target sm_90a\n.address_size 64\n"
    pieces, globals_ = [], []
    for path in samples:
        module = ptxkit.parse_file(path)
        if module.version is None or module.version > (8, 0):
            continue
        for item in module.items:
            text = item.code(include_prefix=True)
            if isinstance(item, ptxkit.Function) and not item.is_declaration:
                pieces.append((item.name, text))
            elif isinstance(item, ptxkit.Directive) and item.name in (".section", ".shared", ".global", ".const"):
                globals_.append(text)
    body, size, copy = [], 0, 0
    while size < megabytes * 1e6:
        for name, text in pieces:
            renamed = re.sub(rf"\b{re.escape(name)}\b", f"{name}_{copy}", text)
            body.append(renamed)
            size += len(renamed)
        copy += 1
    return header + "".join(dict.fromkeys(globals_)) + "".join(body) + "\n"


def ptxas_seconds(path: Path) -> float | None:
    """Wall time of ``ptxas -arch=sm_90a`` on `path`, or None without ptxas / on error."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        result = subprocess.run([ptxas, "-arch=sm_90a", str(path), "-o", f"{scratch}/out.cubin"],
                                capture_output=True)
        elapsed = time.perf_counter() - start
    return elapsed if result.returncode == 0 else None


def measure(path: Path, repeat: int, with_ptxas: bool) -> dict:
    size = path.stat().st_size
    read = best_time(lambda: path.read_bytes(), repeat)
    text = path.read_text()
    parse_print = best_time(lambda: str(ptxkit.parse(text)), repeat)
    check = best_time(lambda: ptxkit.parse(text).check(), repeat) - best_time(lambda: ptxkit.parse(text), repeat)
    ptxas = ptxas_seconds(path) if with_ptxas else None
    return {"name": str(path.relative_to(ROOT / "samples")) if ROOT in path.parents else path.name,
            "size": size, "read": read,
            "parse_print": parse_print, "check": check, "ptxas": ptxas}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=20.0, help="size of the synthetic module")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best is kept)")
    args = parser.parse_args()

    samples = sorted((ROOT / "samples").rglob("*.ptx"))
    rows = [measure(path, args.repeat, with_ptxas=True) for path in samples]
    with tempfile.TemporaryDirectory() as scratch:
        big = Path(scratch) / f"synthetic-{args.megabytes:g}MB.ptx"
        big.write_text(synthetic_module(samples, args.megabytes))
        row = measure(big, max(1, args.repeat - 1), with_ptxas=False)
        row["name"] = f"synthetic ({row['size'] / 1e6:.1f} MB)"
        rows.append(row)

    print(f"ptxkit {ptxkit.__version__} front end; anchor: reading the file; ptxas: ptxas -arch=sm_90a")
    width = max(len(r["name"]) for r in rows)
    head = f"{'workload':<{width}} {'bytes':>10} {'read ms':>8} {'parse+print MB/s':>17} {'x read':>7} " \
           f"{'view MB/s':>10} {'ptxas ms':>9} {'parse/ptxas':>11}"
    print(head)
    print("-" * len(head))
    for r in rows:
        mb = r["size"] / 1e6
        ptxas = f"{r['ptxas'] * 1e3:9.1f}" if r["ptxas"] else f"{'-':>9}"
        ratio = f"{r['parse_print'] / r['ptxas']:11.4f}" if r["ptxas"] else f"{'-':>11}"
        view = f"{mb / r['check']:10.1f}" if r["check"] > 0 else f"{'-':>10}"
        print(f"{r['name']:<{width}} {r['size']:>10} {r['read'] * 1e3:8.3f} {mb / r['parse_print']:17.1f} "
              f"{r['parse_print'] / r['read']:7.1f} {view} {ptxas} {ratio}")


if __name__ == "__main__":
    main()
