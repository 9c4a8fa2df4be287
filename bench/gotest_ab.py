#!/usr/bin/env python3
"""One Go benchmark in two `go test -c` binaries (a: before, b: after), in
interleaved rounds, which goes first alternating, so that a shared
machine's noise lands on both alike. Each run is the binary's whole
process (`-test.run '^$' -test.bench '^NAME$' -test.benchtime Nx`); its
CPU time (user + system, from wait4) is the figure, beside the
benchmark's own ns/op. Prints the medians, b/a of the medians and the
median of the rounds' b/a.

  python3 bench/gotest_ab.py A.test A_DIR B.test B_DIR BenchmarkName ITERS ROUNDS

A_DIR and B_DIR are where each binary runs (its package's directory, for
testdata).
"""
import os
import statistics
import subprocess
import sys


def main() -> None:
    a, adir, b, bdir, bench, n, rounds = sys.argv[1:8]
    cpu = {a: [], b: []}
    nsop = {a: [], b: []}
    ratios = []

    def run(binp: str, d: str) -> float:
        p = subprocess.Popen([binp, "-test.run", "^$", "-test.bench", "^" + bench + "$", "-test.benchtime", n + "x",
                              "-test.count", "1"], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit(out.decode())
        for line in out.decode().splitlines():
            if line.startswith("Benchmark"):
                nsop[binp].append(float(line.split()[2]))
        return ru.ru_utime + ru.ru_stime

    for r in range(int(rounds)):
        order = [(a, adir), (b, bdir)]
        if r % 2:
            order.reverse()
        got = {}
        for binp, d in order:
            got[binp] = run(binp, d)
            cpu[binp].append(got[binp])
        ratios.append(got[b] / got[a])
    ma, mb = statistics.median(cpu[a]), statistics.median(cpu[b])
    print(f"CPU-s medians: a {ma:.3f}, b {mb:.3f}; b/a of the medians {mb / ma:.3f}; median of the rounds' b/a {statistics.median(ratios):.3f}")
    print(f"ns/op medians: a {statistics.median(nsop[a]):.1f}, b {statistics.median(nsop[b]):.1f}")
    print("a", [round(x, 3) for x in cpu[a]])
    print("b", [round(x, 3) for x in cpu[b]])


if __name__ == "__main__":
    main()
