"""docs/judging.md's span judging example, run for real: the help-desk topic pages with half their evidence hidden (the
tests' own files), a chunked sweep (recursive chunks of 16, 32 and 64 tokens; BM25 and RRF), its pool pushed to a real
``label-studio start``, two assessors highlighting through its API, pull, an adjudication round, pull again, and
re-scoring against both versions and against the full judgments.

The assessors: ``admin`` highlights the hidden evidence exactly; ``bob`` leaves out each highlight's last word and
grades the evidence of one document in three a grade lower; both mark every other document not relevant. ``carol``
settles the adjudication round by highlighting the hidden evidence.

``python -m bench.span_judging_demo FOLDER`` prints every command's output.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from bench.judging_simulation import command, parent_of
from bench.paths import REPO

PROJECT = "pages evidence"


def assessors(url: str, files: dict[str, Path], title: str, round_: bool = False) -> int:
    """The demo's assessors annotate every task of the project (the first round, or carol the adjudication round);
    how many tasks hold evidence."""
    from pipeline.annotation_tools.label_studio import ADJUDICATING_SPANS, HIGHLIGHTING, LabelStudio
    from pipeline.judging_maths.scale import Scale
    from tests.pipeline.judge_steps.span_pages import documents, spans_of

    texts = documents(files)
    hidden: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for q, d, g, s, e in spans_of(files["hidden"]):
        hidden.setdefault((q, d), []).append((s, e, g))
    api, scale = LabelStudio(url, "LABEL_STUDIO_API_KEY"), Scale.of(None)
    users = {email: uid for uid, email in api.users().items()}

    def user(email: str) -> int:
        if email not in users:
            users[email] = api.request("POST", "/api/users/", {"email": email, "username": email.split("@")[0]})["id"]
        return users[email]

    counted = 0
    for task in api.tasks(api.project(title)["id"]):
        pair = (task["data"]["query_id"], task["data"]["doc_id"])
        text, mine = texts[pair[1]], hidden.get(pair, [])
        exact = [(s, e, g, text[s:e]) for s, e, g in mine]
        if round_:
            api.highlight(task["id"], scale, exact, not_relevant=not mine, user_id=user("carol@example.com"),
                          interface=ADJUDICATING_SPANS)
            continue
        api.highlight(task["id"], scale, exact, not_relevant=not mine, interface=HIGHLIGHTING)
        shorter = []
        for s, e, g in mine:
            cut = text.rfind(" ", s, e)
            shorter.append((s, cut if cut > s else e, g - 1 if counted % 3 == 2 and g > 1 else g))
        counted += bool(mine)
        api.highlight(task["id"], scale, [(s, e, g, text[s:e]) for s, e, g in shorter], not_relevant=not mine,
                      user_id=user("bob@example.com"))
    return counted


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.span_judging_demo", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.pipeline.judge_steps import label_studio_server as server
    from tests.pipeline.judge_steps.span_pages import corpus_args, write_files

    folder = args.folder.resolve()
    files = write_files(folder / "data")
    said = command(folder, "pipeline", "-m", *corpus_args(files), "chunker=recursive", "chunker.size=16,32,64",
                   "retriever=bm25,rrf", "metrics.measures=[recall,ndcg,span_recall,span_precision,"
                   "span_precision_omega]", "metrics.k=[3,5]", "metrics.budgets=[32,64,128]",
                   "metrics.primary=span_recall@64tok", "metrics.show=[recall@5,span_recall@5,span_recall@64tok]")
    parent = parent_of(said)
    os.environ["LABEL_STUDIO_API_KEY"] = server.TOKEN
    (folder / "label-studio").mkdir(exist_ok=True)
    with server.label_studio(folder / "label-studio") as url:
        print(command(folder, "pipeline.judge", "pool", parent, "--to", "label-studio", "--url", url, "--project",
                      PROJECT))
        print(f"assessors: {assessors(url, files, PROJECT)} task(s) with evidence highlighted by both")
        first = command(folder, "pipeline.judge", "pull", "--project", PROJECT)
        print(first)
        print(command(folder, "pipeline.judge", "adjudicate", "--project", PROJECT))
        assessors(url, files, f"{PROJECT} adjudication", round_=True)
        pulled = command(folder, "pipeline.judge", "pull", "--project", PROJECT)
        print(pulled)
    print("Before the adjudication round (ties to the lower grade):")
    print(command(folder, "pipeline.judge", "rescore", parent, "--qrels",
                  re.findall(r"span judgment version ([0-9a-f]{16}) logged", first)[-1]))
    print("After it:")
    print(command(folder, "pipeline.judge", "rescore", parent, "--qrels",
                  re.findall(r"span judgment version ([0-9a-f]{16}) logged", pulled)[-1]))
    print("Against the full judgments:")
    print(command(folder, "pipeline.judge", "rescore", parent, "--qrels", str(files["full"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
