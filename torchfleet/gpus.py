"""`torchfleet gpus`: the GPU catalog as a table, like `sky show-gpus` (issue 13, cost at a glance).

One row per machine a stack can get: GPU, cloud, machine type, GPUs per machine, memory per GPU,
vCPUs and memory of the machine, and its on-demand list price (USD/hour, from
components/catalog/prices.yaml, with the region and date it was read). Retired offerings are not
listed (a stack cannot use them); the footer names them. Offline: no cloud is asked.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from components import catalog
from components.catalog import prices
from torchfleet.cost import usd_text
from torchfleet.jobs.errors import EXIT_OK, UsageError

CLOUDS = ("aws", "gcp", "azure")
COLUMNS = ("GPU", "CLOUD", "MACHINE", "GPUS", "GPU MEM", "VCPUS", "MEMORY", "USD/HOUR")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gpus",
        help="list the GPUs each cloud offers: machine types, GPUs per machine, memory, on-demand price",
        description="List the GPU catalog, offline. Exit codes: 0 ok, 2 an unknown --gpu.",
        epilog="Prices are on-demand list prices for one region per cloud (shown under the table); "
               "spot costs less and changes too often to ship.",
    )
    p.add_argument("--cloud", choices=CLOUDS, help="only this cloud")
    p.add_argument("--gpu", help=f"only this GPU, one of: {', '.join(catalog.gpu_keys())}")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="default: table")
    p.set_defaults(func=run)


def rows(cloud: str | None = None, gpu: str | None = None) -> list[dict[str, Any]]:
    """One dict per available machine, in catalog order (GPU, then cloud, then machine)."""
    found = []
    for key in catalog.gpu_keys():
        entry = catalog.load()[key]
        if gpu is not None and key != gpu:
            continue
        for name, offer in entry.offerings.items():
            if not offer.available or (cloud is not None and name != cloud):
                continue
            basis = prices.of(name)
            for m in offer.machines:
                usd = catalog.list_price(key, name, m.type)
                found.append({
                    "gpu": key, "name": entry.name, "cloud": name, "machine": m.type, "gpus": m.gpus,
                    "gpuMemoryGb": entry.memory_gb, "vcpus": m.vcpus, "memoryGib": m.memory_gib,
                    "usdPerHour": usd,
                    "unpriced": basis.unpriced.get(m.type) if basis and usd is None else None,
                    "priceRegion": basis.region if basis else None,
                    "priced": basis.priced if basis else None,
                    "priceSource": basis.source if basis else None,
                })
    return found


def retired(cloud: str | None, gpu: str | None) -> list[str]:
    """"k80 (aws, gcp, azure)" for each GPU with a retired offering in the selection."""
    lines = []
    for key in catalog.gpu_keys():
        if gpu is not None and key != gpu:
            continue
        gone = [c for c, o in catalog.load()[key].offerings.items() if not o.available and cloud in (None, c)]
        if gone:
            lines.append(f"{key} ({', '.join(gone)})")
    return lines


def render_table(found: list[dict[str, Any]]) -> str:
    cells = [
        (r["gpu"], r["cloud"], r["machine"], str(r["gpus"]), f"{r['gpuMemoryGb']} GB", str(r["vcpus"]),
         f"{r['memoryGib']} GiB", usd_text(r["usdPerHour"]) if r["usdPerHour"] is not None else "-")
        for r in found
    ]
    widths = [max(len(c[i]) for c in [COLUMNS, *cells]) for i in range(len(COLUMNS))]
    right = {3, 4, 5, 6, 7}  # numbers line up on the right
    return "\n".join(
        "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        .rstrip()
        for row in [COLUMNS, *cells]
    )


def footer(found: list[dict[str, Any]], cloud: str | None, gpu: str | None) -> list[str]:
    lines = []
    for name in dict.fromkeys(r["cloud"] for r in found):
        basis = prices.of(name)
        if basis:
            lines.append(f"{name}: {basis.basis}")
    unpriced: dict[str, list[str]] = {}
    for r in found:
        if r["unpriced"]:
            unpriced.setdefault(r["unpriced"], []).append(r["machine"])
    lines += [f"{', '.join(machines)}: no list price ({why})" for why, machines in unpriced.items()]
    gone = retired(cloud, gpu)
    if gone:
        lines.append(f"retired, refused in a stack: {'; '.join(gone)}")
    return lines


def run(args: argparse.Namespace) -> int:
    gpu = args.gpu.lower() if args.gpu is not None else None
    if gpu is not None and gpu not in catalog.load():
        raise UsageError(f"--gpu: unknown GPU {args.gpu!r}; the catalog has: {', '.join(catalog.gpu_keys())}")
    found = rows(args.cloud, gpu)
    if args.output == "json":
        json.dump(found, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    if not found:
        where = f" on {args.cloud}" if args.cloud else ""
        print(f"no available {gpu} machines{where}; retired: {'; '.join(retired(args.cloud, gpu)) or '-'}")
        return EXIT_OK
    print(render_table(found))
    print()
    print("\n".join(footer(found, args.cloud, gpu)))
    return EXIT_OK
