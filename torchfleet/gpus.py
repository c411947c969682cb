"""`torchfleet gpus`: the GPU catalog as a table, like `sky show-gpus` (issue 13, cost at a glance).

One row per machine a stack can get: GPU, cloud, machine type, GPUs per machine, memory per GPU,
vCPUs and memory of the machine, and its on-demand list price (USD/hour, from
components/catalog/prices.yaml, with the region and date it was read). With --stack (its cloud and
region) or --cloud and --region, also that region's on-demand and spot prices from
components/catalog/spot_prices.yaml with their date (issue 32), a snapshot; a machine without a row
there shows "-" and the footer says "no spot price known for <machine> in <cloud>/<region>" and why.
Retired offerings are not listed (a stack cannot use them); the footer names them. Offline: no cloud
is asked.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any

from components import catalog
from components.catalog import prices, spot_prices
from torchfleet.cost import usd_text
from torchfleet.jobs.errors import EXIT_OK, UsageError

CLOUDS = ("aws", "gcp", "azure")
COLUMNS = ("GPU", "CLOUD", "MACHINE", "GPUS", "GPU MEM", "VCPUS", "MEMORY", "USD/HOUR")
REGIONAL_COLUMNS = ("ON-DEMAND", "SPOT")  # with a region: its prices (spot_prices.yaml)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gpus",
        help="list the GPUs each cloud offers: machine types, GPUs per machine, memory, on-demand price",
        description="List the GPU catalog, offline. Exit codes: 0 ok, 2 an unknown --gpu or a bad --region/--stack.",
        epilog="USD/HOUR is the on-demand list price for one region per cloud (shown under the table). With --stack "
               "or --cloud and --region, ON-DEMAND and SPOT are that region's prices where "
               "components/catalog/spot_prices.yaml has them, a snapshot dated under the table (- where it has "
               "none, and the footer says why).",
    )
    p.add_argument("--cloud", choices=CLOUDS, help="only this cloud")
    p.add_argument("--gpu", help=f"only this GPU, one of: {', '.join(catalog.gpu_keys())}")
    p.add_argument("--stack", help="a stack's name (aws-usw2, in stacks/) or its file: its cloud, and its region's "
                                   "on-demand and spot prices beside the list price")
    p.add_argument("--region", help="with --cloud: this region's on-demand and spot prices beside the list price")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="default: table")
    p.set_defaults(func=run)


def rows(cloud: str | None = None, gpu: str | None = None, region: str | None = None) -> list[dict[str, Any]]:
    """One dict per available machine, in catalog order (GPU, then cloud, then machine); with a
    region, its on-demand and spot prices (None where spot_prices.yaml has no row)."""
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
                    **(_regional(name, region, m.type) if region is not None else {}),
                })
    return found


def _regional(cloud: str, region: str, machine: str) -> dict[str, Any]:
    row = spot_prices.price(cloud, region, machine)
    return {"region": region, "regionOnDemandUsdPerHour": row.on_demand if row else None,
            "regionSpotUsdPerHour": row.spot if row else None, "regionPriced": row.priced if row else None,
            "regionPriceSource": row.source if row else None}


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


def _usd(value: float | None) -> str:
    return usd_text(value) if value is not None else "-"


def render_table(found: list[dict[str, Any]]) -> str:
    regional = any("region" in r for r in found)
    columns = COLUMNS + REGIONAL_COLUMNS if regional else COLUMNS
    cells = [
        (r["gpu"], r["cloud"], r["machine"], str(r["gpus"]), f"{r['gpuMemoryGb']} GB", str(r["vcpus"]),
         f"{r['memoryGib']} GiB", _usd(r["usdPerHour"]),
         *((_usd(r["regionOnDemandUsdPerHour"]), _usd(r["regionSpotUsdPerHour"])) if regional else ()))
        for r in found
    ]
    widths = [max(len(c[i]) for c in [columns, *cells]) for i in range(len(columns))]
    right = set(range(3, len(columns)))  # numbers line up on the right
    return "\n".join(
        "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        .rstrip()
        for row in [columns, *cells]
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
    regional = [r for r in found if "region" in r]
    dated = dict.fromkeys((r["regionPriced"], r["regionPriceSource"]) for r in regional if r["regionPriced"])
    for priced, source in dated:
        lines.append(f"ON-DEMAND, SPOT: {regional[0]['region']} prices, a snapshot of {priced} ({source})")
        old = spot_prices.stale(priced)  # its age, once it is old (issue 32)
        if old:
            lines.append(old)
    missing: dict[str, list[str]] = {}  # why -> machines: "no spot price known for X in Y", never a guess
    for r in regional:
        if r["regionPriced"] is None:
            why = spot_prices.unknown(r["cloud"], r["region"], r["machine"]) or spot_prices.NOT_LISTED
            missing.setdefault(why, [])
            if r["machine"] not in missing[why]:  # one row per GPU a machine carries: name it once
                missing[why].append(r["machine"])
    for why, machines in missing.items():
        lines.append(f"no spot price known for {', '.join(machines)} in {regional[0]['cloud']}/{regional[0]['region']} "
                     f"({why}): ON-DEMAND and SPOT show -, USD/HOUR is the list price above")
    gone = retired(cloud, gpu)
    if gone:
        lines.append(f"retired, refused in a stack: {'; '.join(gone)}")
    return lines


def run(args: argparse.Namespace) -> int:
    gpu = args.gpu.lower() if args.gpu is not None else None
    if gpu is not None and gpu not in catalog.load():
        raise UsageError(f"--gpu: unknown GPU {args.gpu!r}; the catalog has: {', '.join(catalog.gpu_keys())}")
    cloud, region = _cloud_and_region(args)
    found = rows(cloud, gpu, region)
    if args.output == "json":
        json.dump(found, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    if not found:
        where = f" on {cloud}" if cloud else ""
        print(f"no available {gpu} machines{where}; retired: {'; '.join(retired(cloud, gpu)) or '-'}")
        return EXIT_OK
    print(render_table(found))
    print()
    print("\n".join(footer(found, cloud, gpu)))
    return EXIT_OK


def _cloud_and_region(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """--stack gives its cloud and region; --region needs --cloud and a region that cloud has."""
    from components.catalog import regions as region_catalog

    if args.stack is not None:
        if args.region is not None or args.cloud is not None:
            raise UsageError("--stack: gives the cloud and region itself; leave out --cloud and --region")
        from torchfleet.jobs import target as targets

        t = targets.from_stack(args.stack)
        if t.cloud not in CLOUDS:
            raise UsageError(f"--stack {args.stack}: a {t.cloud} stack has no cloud prices; one of {', '.join(CLOUDS)}")
        return t.cloud, t.region
    if args.region is None:
        return args.cloud, None
    if args.cloud is None:
        raise UsageError(f"--region {args.region}: give --cloud too (region names are per cloud)")
    if region_catalog.region(args.cloud, args.region) is None:
        # The catalog's regions are what is checked (components/catalog/regions.yaml), so they are what is
        # named; spot_prices.yaml's rows are a few of them and said none for AWS (issue 32's walk).
        known = sorted(region_catalog.load()[args.cloud].regions)
        close = difflib.get_close_matches(args.region, known, n=1)
        meant = f"did you mean {close[0]}? " if close else ""
        raise UsageError(f"--region: {args.region!r} is not one of {args.cloud}'s regions; {meant}"
                         f"components/catalog/regions.yaml knows: {', '.join(known)}")
    return args.cloud, args.region
