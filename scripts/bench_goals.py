#!/usr/bin/env python3
"""The footprint goals (issue 22) in one table, from what `make bench` printed.

Usage: bench_goals.py DIR   (DIR holds the outputs scripts/bench.sh keeps:
gbench.json, cdi.out, footprint.out, informer.out, operator.out)

Each goal is met or missed as measured; a missed memory goal is printed with
the floor every gpuop process starts from (`gpuop version`), so the part a
component adds over it shows.
"""
import json
import os
import re
import sys


def read(d, name):
    path = os.path.join(d, name)
    return open(path).read() if os.path.exists(path) else ""


def main():
    d = sys.argv[1]
    rows = []

    def row(figure, now, goal, met, note=""):
        status = "met" if met else "missed"
        rows.append(f"| {figure} | {now} | {goal}: {status} | {note} |")

    footprint = read(d, "footprint.out")
    floor = re.search(r"floor of any gpuop process\): max RSS ([\d.]+) MiB", footprint)
    floor_note = f"floor (`gpuop version`) {floor.group(1)} MiB" if floor else ""
    for line in footprint.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[5].startswith("<"):
            continue
        component, scenario, rss, pss, private, goal = cells
        goal_text, status = goal.rsplit(":", 1)
        row(f"{component} RSS, {scenario}", f"{rss} (PSS {pss}, private {private})", goal_text,
            status.strip() == "met", "" if status.strip() == "met" else floor_note)

    cdi = re.search(r"gpuop cdi generate.*?([\d.]+) ms\s+(\d+) KiB", read(d, "cdi.out"))
    if cdi:
        ms, mib = float(cdi.group(1)), int(cdi.group(2)) / 1024
        row("`gpuop cdi generate` 8 × 7 MIG: time", f"{ms:.1f} ms", "< 20 ms", ms < 20)
        row("`gpuop cdi generate` 8 × 7 MIG: max RSS", f"{mib:.1f} MiB", "< 10 MiB", mib < 10,
            floor_note)

    for line in read(d, "operator.out").splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r["nodes"] != 5000:
            continue
        row("operator peak RSS, 5,000 GPU nodes joining", f'{r["operator_hwm_mib"]} MiB',
            "< 30 MiB", r["operator_hwm_mib"] < 30)
        p = r["with_pods_after_12s"]  # after a heap scavenge (base/memory.h)
        row(f'operator RSS holding them and their {r["operand_pods"]:,} operand pods',
            f'{p["rss_mib"]} MiB (PSS {p["pss_mib"]}, private {p["private_mib"]}; '
            f'peak {r["with_pods_hwm_mib"]}; idle CPU {r["idle_cpu_percent"]}%)', "< 30 MiB",
            p["rss_mib"] < 30,
            f'{r["settled_after_12s"]["rss_mib"]} MiB with the nodes alone; the pods are kept '
            "compact, ~1.8 KB each with their keys, index entries and the heap's holes "
            "(docs/performance.md)")

    informer = read(d, "informer.out")
    syncs = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"^(tree|compact): median sync_ms ([\d.]+), max rss ([\d.]+) MiB", informer, re.M)}
    if "compact" in syncs:
        ms, mib = syncs["compact"]
        row("informer sync of 5,000 whole nodes: time", f"{ms / 1000:.2f} s", "< 2 s", ms < 2000)
        tree = (f'; as json trees {syncs["tree"][1]:.1f} MiB, {syncs["tree"][0] / 1000:.2f} s'
                if "tree" in syncs else "")
        row("informer sync of 5,000 whole nodes: RSS", f"{mib:.1f} MiB{tree}", "< 30 MiB",
            mib < 30, "each node kept as CBOR bytes (Storage::kCompact)")

    gbench = read(d, "gbench.json")
    if gbench:
        for b in json.loads(gbench)["benchmarks"]:
            if b["name"] == "BM_StoreListNodesSerialized":
                ms = b["real_time"] if b["time_unit"] == "ms" else b["real_time"] / 1000
                row("emulator: serve a 5,000-node list (store side, JSON)", f"{ms:.1f} ms",
                    "< 50 ms", ms < 50)

    image = read(d, "image.out").strip()
    if image:
        mb = int(image) / 1e6
        row("the image", f"{mb:.0f} MB", "< 50 MB", mb < 50)
    else:
        rows.append("| the image | not built here (`make image`) | < 50 MB | |")

    print("| figure | now | goal | note |")
    print("|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
