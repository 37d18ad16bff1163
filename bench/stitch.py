"""Stitched collections for chunking studies (:mod:`pipeline.data.stitch`): short documents made into long pages,
their judgments into span judgments.

    python -m bench.stitch helpdesk FOLDER             # the help-desk corpus as four topic pages (what ships as
                                                       # pipeline/data/helpdesk_pages, corpus=helpdesk_pages)
    python -m bench.stitch scifact FOLDER [--per-page 10] [--scifact PATH]
                                                       # SciFact's abstracts, --per-page to a page, test split

Then ``python -m pipeline corpus=beir corpus.path=FOLDER chunker=recursive chunker.size=256``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.paths import SCIFACT
from pipeline.data.collection import Collection
from pipeline.data.stitch import Page, in_pages_of, stitch, write_beir

# The help-desk corpus by topic: four pages, a section per topic, the documents in corpus order.
HELPDESK_PAGES = (
    Page("billing", "Billing", [("Pricing", ["pricing1", "pricing2", "pricing3"]),
                                ("Refunds", ["refund1", "refund2", "refund3"]),
                                ("Invoices", ["invoice1", "invoice2", "invoice3"])]),
    Page("data", "Your data", [("Export", ["export1", "export2", "export3"]),
                               ("Backups", ["backup1", "backup2", "backup3"])]),
    Page("access", "Access", [("Single sign-on", ["sso1", "sso2", "sso3"]),
                              ("Passwords", ["pwd1", "pwd2", "pwd3"]),
                              ("API", ["api1", "api2", "api3"])]),
    Page("other", "Other questions", [("Integrations", ["misc1"]), ("Limits", ["misc2"]), ("Mobile", ["misc3"]),
                                      ("Support", ["misc4"])]),
)


def helpdesk_pages(folder: Path) -> Collection:
    """Write the help-desk corpus as topic pages into ``folder``; returns the original collection."""
    from pipeline.data import helpdesk

    collection = helpdesk()
    write_beir(stitch(collection, HELPDESK_PAGES), collection, folder)
    return collection


def scifact_pages(folder: Path, per_page: int, source: Path = SCIFACT, split: str = "test") -> Collection:
    """Write SciFact's abstracts, ``per_page`` consecutive ones to a page, with its ``split`` judgments as spans."""
    from pipeline.data import load_beir

    collection = load_beir(source, split)
    write_beir(stitch(collection, in_pages_of(collection, per_page)), collection, folder, split)
    return collection


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stitch", description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", choices=("helpdesk", "scifact"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--per-page", type=int, default=10, help="scifact: abstracts per page (default 10)")
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help="scifact's BEIR folder (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.corpus == "helpdesk":
        helpdesk_pages(args.folder)
    else:
        if not args.scifact.is_dir():
            print(f"bench.stitch: no SciFact folder at {args.scifact} (--scifact PATH, or RANKSCOPE_SCIFACT)",
                  file=sys.stderr)
            return 2
        scifact_pages(args.folder, args.per_page, args.scifact)
    print(f"wrote {args.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
