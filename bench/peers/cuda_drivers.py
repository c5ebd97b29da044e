"""The standalone cuSOLVER micro-benchmarks behind the one-matrix linalg drivers (docs/architecture.rst),
compiled with nvcc, run at the sizes that page cites, and their `result` lines merged into
bench/results/<device>-<date>.json under "cuda_drivers":

    python3 bench/peers/cuda_drivers.py [--only getrf_apis solve_routes svd_routes]

- getrf_apis.cu: solve's cuSOLVER API, the legacy getrf/getrs against the 64-bit Xgetrf/Xgetrs;
- solve_routes.cu: getrs against two triangular solves and a row permutation (kTrsmSolveMinN);
- svd_routes.cu: gesvdp against QR then gesvdj, and the others, for one tall matrix (kPolarMinN).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from peer_results import merge_results

HERE = os.path.dirname(os.path.abspath(__file__))
# program -> the argument lists of its runs
RUNS = {
    "getrf_apis": [[]],
    "solve_routes": [["256", "1", "256", "64", "512", "1", "512", "64", "1024", "1", "1024", "64", "2048", "64",
                      "4096", "1", "4096", "64", "4096", "512", "8192", "64"]],
    "svd_routes": [[m, n] for m, n in (("4096", "1024"), ("2048", "1024"), ("1536", "1024"), ("8192", "512"),
                                       ("1024", "512"), ("4096", "256"), ("2048", "256"), ("1024", "128"),
                                       ("300", "40"))],
}


def device_name():
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[0]


def run(program, folder):
    binary = os.path.join(folder, program)
    subprocess.run(["nvcc", "-O2", "-std=c++17", "-arch=native", "-o", binary, os.path.join(HERE, program + ".cu"),
                    "-lcusolver", "-lcublas"], check=True)
    rows = []
    for args in RUNS[program]:
        out = subprocess.run([binary, *args], capture_output=True, text=True, check=True).stdout
        sys.stdout.write(out)
        rows += [json.loads(line[len("result "):]) for line in out.splitlines() if line.startswith("result ")]
    if not rows:
        raise SystemExit(f"cuda_drivers: {program} printed no result line")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(RUNS), choices=list(RUNS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        results = {program: run(program, folder) for program in args.only}
    merge_results("cuda_drivers", results, device_name(), merge_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
