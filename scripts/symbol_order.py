#!/usr/bin/env python3
"""Writes src/gpuop.symbol-order: the functions gpuop's short commands run,
the ones most commands share first, for the Release link to place together.

Usage: scripts/symbol_order.py BUILD   (BUILD: a Release build, e.g. `build`)

Why: a short command (`gpuop cdi generate`, a CDI hook the runtime runs for
every container) exits before anything could page its code out, so its peak
RSS is every page of gpuop it touched, and the kernel maps the 64 KB around
each page it faults on. In definition order the code one command runs is
spread over the 13 MB of text: `gpuop version` ran 236 KB of it and had
2.6 MiB of it resident. The Release link (CMakeLists.txt) places the functions
listed here first, in this order, so those pages are few and adjacent.

How: each command below runs once under valgrind's callgrind, which records
every function that executed; a function's rank is the number of commands
that ran it (more first), then when it first ran. The list only orders the
link: a function renamed since the list was written is placed as if it were
not listed (lld is told not to warn), so the list can trail the code; run
this again when the floor `make bench` prints grows.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HEADER = """\
# The Release link's function order (lld --symbol-ordering-file): what
# gpuop's short commands run, the functions most of them share first.
# Written by scripts/symbol_order.py from callgrind runs; regenerate, do not
# edit. Why: scripts/symbol_order.py and docs/performance.md (Footprint).
"""


def executed_functions(callgrind_out, binary):
    """The mangled names of the functions of `binary` that ran, in the order
    callgrind first met them."""
    names, objects, order = {}, {}, []
    current_object = None
    seen = set()
    for line in open(callgrind_out, errors="replace"):
        m = re.match(r"^(ob|cob|fl|fi|fe|cfi|cfl)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            kind, ident, name = m.groups()
            if kind in ("ob", "cob"):
                if name:
                    objects[ident] = name
                if kind == "ob":
                    current_object = objects.get(ident)
            continue
        m = re.match(r"^(fn|cfn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if not m:
            continue
        kind, ident, name = m.groups()
        if name:
            names[ident] = name
        if kind != "fn" or current_object is None:
            continue
        if os.path.realpath(current_object) != binary:
            continue
        # callgrind marks a recursion level ("f'2") and names what has no
        # symbol ("0x...", "(below main)"): neither is a symbol lld knows.
        fn = re.sub(r"'\d+$", "", names.get(ident, ""))
        if fn and fn not in seen and not fn.startswith("0x") and " " not in fn:
            seen.add(fn)
            order.append(fn)
    return order


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/symbol_order.py BUILD (a Release build directory)")
    build = sys.argv[1]
    if not shutil.which("valgrind"):
        sys.exit("symbol_order.py: valgrind is not installed (apt-get install valgrind)")
    gpuop = os.path.realpath(os.path.join(build, "bin", "gpuop"))
    nvml = os.path.realpath(os.path.join(build, "lib", "libnvml-sim.so"))
    for path in (gpuop, nvml):
        if not os.path.exists(path):
            sys.exit(f"symbol_order.py: {path} is missing: build it first "
                     f"(cmake --build {build} --target gpuop nvml-sim)")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="gpuop-order.")
    try:
        env = dict(os.environ, GPUOP_NVML_LIB=nvml, GPUOP_SIM_MACHINE="dgx-h100",
                   GPUOP_SIM_STATE=os.path.join(tmp, "state"), GPUOP_LOG_LEVEL="warn")
        root = os.path.join(tmp, "root")
        subprocess.run([gpuop, "sim", "host-root", "--machine", "dgx-h100", root], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        # The largest node layout: every GPU in MIG mode, 7 × 1g.10gb each.
        for gpu in range(8):
            subprocess.run([gpuop, "sim", "gpu", "mig", "--gpu", str(gpu), "--enable",
                            "--create", ",".join(["1g.10gb"] * 7)], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        # A container for the hooks: a bundle whose config.json names its root.
        bundle = os.path.join(tmp, "bundle")
        os.makedirs(os.path.join(bundle, "rootfs", "usr", "lib", "x86_64-linux-gnu"))
        os.makedirs(os.path.join(bundle, "rootfs", "etc"))
        with open(os.path.join(bundle, "config.json"), "w") as f:
            f.write('{"ociVersion":"1.0.2","root":{"path":"rootfs"}}')
        state = '{"ociVersion":"1.0.2","id":"c","status":"creating","pid":1,"bundle":"%s"}' % bundle
        commands = [
            ("version", [gpuop, "version"], None),
            ("cdi generate", [gpuop, "cdi", "generate", "--driver-root", root, "--dev-root", root,
                              "--output", os.path.join(tmp, "cdi.yaml")], None),
            ("create-symlinks", [gpuop, "cdi", "hook", "create-symlinks", "--link",
                                 "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so"], state),
            ("update-ldcache", [gpuop, "cdi", "hook", "update-ldcache", "--folder",
                                "/usr/lib/x86_64-linux-gnu"], state),
            ("nvml list", [gpuop, "nvml", "list"], None),
            ("cdi list", [gpuop, "cdi", "list", "--spec-dir", tmp], None),
            ("help", [gpuop, "--help"], None),
        ]
        runs = []
        for label, argv, stdin in commands:
            out = os.path.join(tmp, "callgrind." + label.replace(" ", "-"))
            r = subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no",
                                "--callgrind-out-file=" + out] + argv, env=env, input=stdin,
                               text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if not os.path.exists(out):
                sys.exit(f"symbol_order.py: callgrind wrote nothing for `{label}`:\n{r.stderr}")
            functions = executed_functions(out, gpuop)
            print(f"{label}: {len(functions)} functions (exit {r.returncode})")
            runs.append(functions)
        rank = {}
        for i, functions in enumerate(runs):
            for position, fn in enumerate(functions):
                shared, first = rank.get(fn, (0, (i, position)))
                rank[fn] = (shared + 1, first)
        ordered = sorted(rank, key=lambda fn: (-rank[fn][0], rank[fn][1]))
        path = os.path.join(repo, "src", "gpuop.symbol-order")
        with open(path, "w") as f:
            f.write(HEADER)
            for fn in ordered:
                f.write(fn + "\n")
        print(f"{path}: {len(ordered)} functions")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
