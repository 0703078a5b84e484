#!/usr/bin/env python3
"""Clang's thread-safety analysis over the sources that use base/mutex.h.

gpuop builds with gcc, which ignores the GPUOP_GUARDED_BY / GPUOP_REQUIRES
annotations; this compiles (syntax only) each .cc that takes part with
clang++ -Wthread-safety -Werror, using the flags of BUILD's
compile_commands.json. A .cc takes part when it or its own header includes
base/mutex.h.

usage: scripts/thread_safety.py BUILD [FILE.cc ...]
"""
import concurrent.futures
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# gcc-only flags, and what a syntax-only run has no use for.
DROP = {"-c", "-MD", "-Wno-restrict", "-Wno-subobject-linkage"}
DROP_WITH_VALUE = {"-o", "-MT", "-MF"}
DROP_PREFIXES = ("-fsanitize", "--param", "-fno-sanitize")


def participates(cc: pathlib.Path) -> bool:
    header = cc.with_suffix(".h")
    for f in (cc, header):
        if f.exists() and '#include "base/mutex.h"' in f.read_text(errors="replace"):
            return True
    return False


def clang_command(entry: dict) -> list:
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = ["clang++"], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in DROP_WITH_VALUE:
            skip = True
        elif a in DROP or a.startswith(DROP_PREFIXES):
            continue
        else:
            out.append(a)
    return out + ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety"]


def unity_members(entry: dict) -> dict:
    """The .cc files a unity source (CMake's Unity/unity_N_cxx.cxx) includes,
    each with the unity source's command aimed at it: one target's flags."""
    unity = pathlib.Path(entry["directory"], entry["file"])
    if "/Unity/" not in str(unity) or not unity.exists():
        return {}
    out = {}
    for line in unity.read_text().splitlines():
        if line.startswith('#include "') and line.endswith('.cc"'):
            cc = str(pathlib.Path(line[len('#include "'):-1]).resolve())
            member = dict(entry, file=cc)
            if "command" in member:
                member["command"] = member["command"].replace(entry["file"], cc)
            else:
                member["arguments"] = [cc if a == entry["file"] else a
                                       for a in member["arguments"]]
            out[cc] = member
    return out


def check(entry: dict) -> tuple:
    r = subprocess.run(clang_command(entry), cwd=entry["directory"], capture_output=True, text=True)
    return entry["file"], r.returncode, r.stderr


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if shutil.which("clang++") is None:
        print("thread_safety: clang++ is missing (scripts/install-deps.sh installs it)",
              file=sys.stderr)
        return 1
    db_path = pathlib.Path(sys.argv[1]) / "compile_commands.json"
    if not db_path.exists():
        print(f"thread_safety: {db_path} is missing: configure the build first (make test does)",
              file=sys.stderr)
        return 1
    db = {}
    for e in json.loads(db_path.read_text()):
        db[str(pathlib.Path(e["file"]).resolve())] = e
        db.update(unity_members(e))
    if len(sys.argv) > 2:
        files = [str(pathlib.Path(f).resolve()) for f in sys.argv[2:]]
    else:
        files = sorted(f for f in db if f.startswith(str(ROOT / "src") + os.sep)
                       and f.endswith(".cc") and participates(pathlib.Path(f)))
    missing = [f for f in files if f not in db]
    if missing:
        print("thread_safety: not in the compile database: " + ", ".join(missing), file=sys.stderr)
        return 1
    if not files:
        print("thread_safety: no source includes base/mutex.h", file=sys.stderr)
        return 1
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for name, rc, err in pool.map(check, (db[f] for f in files)):
            if rc != 0:
                failed += 1
                print(f"--- {os.path.relpath(name, ROOT)}\n{err}", file=sys.stderr)
    print(f"thread_safety: {len(files) - failed} of {len(files)} sources pass clang's analysis")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
