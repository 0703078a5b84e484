#!/usr/bin/env python3
"""Runs the examples of README.md and docs/*.md that are marked doc-test.

Docs that cannot rot (issue 29). A fenced block whose info string is
`sh doc-test` is a script: it runs as written, with `bash -e -o pipefail`, and
must exit 0. A block `console doc-test` is a transcript: each `$ ` line (with
its `\\` continuations) is a command that must exit 0, and the lines shown
under it must appear in its output, in that order (other lines may come
between; a line `...` is only a reminder of that).

Each block runs in a fresh temporary directory that looks like a checkout
(`build` and `deploy` are links to the build and the repository's deploy/),
with `gpuop` on PATH, no GPUOP_* or KUBECONFIG from the caller, a timeout,
and its whole process group killed afterwards, so what it left in the
background goes with it. Blocks that need a real GPU or cluster are simply
not marked.

Usage: doc_runner.py BUILD_DIR FILE.md...   (exit 1 on the first failure)
"""
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import threading

OPEN = re.compile(r"^```(sh|console)\s+doc-test\s*$")
TIMEOUT = 180
MARK = "@@doc-test@@"


def blocks(path):
    """(kind, first line number, lines) of each doc-test block of a file."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            sys.exit(f"{path}:{i + 1}: a doc-test block without its closing ```")
        yield m.group(1), i + 1, lines[i + 1:j]
        i = j + 1


def transcript(lines):
    """[(command, [expected lines])] of a console block."""
    steps = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"a console block must start with '$ ', not {lines[i]!r}")
        cmd = [lines[i][2:]]
        while cmd[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd.append(lines[i])
        i += 1
        want = []
        while i < len(lines) and not lines[i].startswith("$ "):
            if lines[i].strip() not in ("", "..."):
                want.append(lines[i].rstrip())
            i += 1
        steps.append(("\n".join(cmd), want))
    return steps


def run(script, build, repo):
    """(exit code, output) of a script in a fresh checkout-like directory."""
    with tempfile.TemporaryDirectory(prefix="gpuop-doc-") as tmp:
        os.symlink(build, os.path.join(tmp, "build"))
        os.symlink(os.path.join(repo, "deploy"), os.path.join(tmp, "deploy"))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GPUOP_") and k not in ("KUBECONFIG", "NVIDIA_DRIVER_ROOT")}
        env.update(PATH=os.path.join(build, "bin") + ":" + env.get("PATH", "/usr/bin:/bin"),
                   HOME=tmp, TMPDIR=tmp)
        with open(os.path.join(tmp, "block.sh"), "w") as f:
            f.write(script)
        p = subprocess.Popen(["bash", "-e", "-o", "pipefail", "block.sh"], cwd=tmp, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        # Read while it runs: what the block leaves in the background holds
        # the pipe open after the block itself is done.
        chunks = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: p.stdout.read1(65536), b"")))
        reader.start()
        try:
            rc = p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = 124
        finally:
            # What the block started in the background (servers, watchers).
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            reader.join()
        out = b"".join(chunks).decode(errors="replace")
        if rc == 124:
            out += f"\n(timed out after {TIMEOUT} s)"
        return rc, out


def check_console(steps, build, repo):
    """None, or what went wrong."""
    script = "".join(f"echo '{MARK}'\n{cmd}\n" for cmd, _ in steps)
    rc, out = run(script, build, repo)
    parts = out.split(MARK + "\n")[1:]
    if rc != 0:
        done = len(parts)
        return f"`{steps[done - 1][0] if done else steps[0][0]}` exited {rc}:\n{out[-2000:]}"
    for (cmd, want), got in zip(steps, parts):
        have = [line.rstrip() for line in got.splitlines()]
        at = 0
        for w in want:
            while at < len(have) and have[at] != w:
                at += 1
            if at == len(have):
                return f"`{cmd}` no longer prints {w!r} (in order); it printed:\n{got[-2000:]}"
            at += 1
    return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build = str(pathlib.Path(sys.argv[1]).resolve())
    repo = str(pathlib.Path(__file__).resolve().parents[2])
    ran = 0
    for name in sys.argv[2:]:
        path = pathlib.Path(name)
        for kind, line, lines in blocks(path):
            where = f"{path}:{line}"
            if kind == "sh":
                rc, out = run("\n".join(lines) + "\n", build, repo)
                err = None if rc == 0 else f"exited {rc}:\n{out[-3000:]}"
            else:
                try:
                    err = check_console(transcript(lines), build, repo)
                except ValueError as e:
                    err = str(e)
            if err:
                print(f"FAIL: {where}: {err}", file=sys.stderr)
                return 1
            print(f"ok   {where} ({kind}, {len(lines)} lines)")
            ran += 1
    if ran == 0:
        print("FAIL: no doc-test block found", file=sys.stderr)
        return 1
    print(f"doc_runner: {ran} blocks ran as documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
