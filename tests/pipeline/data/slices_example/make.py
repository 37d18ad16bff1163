"""Makes this folder's constructed example of a reversal (docs/slices.md): 72 questions of two teams, one relevant
document each, and two systems' rankings as TREC run files. ``candidate`` ranks the relevant document higher than
``current`` on every data question, and lower on every billing question, on purpose: better overall, worse on
billing. Run from the repository root: python tests/pipeline/data/slices_example/make.py"""

from __future__ import annotations

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOPICS = {
    "data": ["export", "backup", "import", "archive", "sync", "restore"],
    "billing": ["invoice", "refund", "payment", "receipt"],
}
WORDS = ["please", "tell", "me", "how", "the", "works", "for", "my", "team", "account", "today"]


def main() -> None:
    questions, docs, judgments = [], [], []
    for i in range(72):
        team = "data" if i < 60 else "billing"
        topic = TOPICS[team][i % len(TOPICS[team])]
        text = " ".join([f"{topic} question {i}", *WORDS[: 2 + (i * 7) % 9]])  # lengths 5 to 13 words
        questions.append({"qid": f"q{i:02d}", "question": text, "team": team})
        docs.append({"id": f"d{i:02d}", "text": f"How {topic} works: answer {i}."})
        judgments.append({"qid": f"q{i:02d}", "doc": f"d{i:02d}", "grade": 1})
    docs += [{"id": f"x{k}", "text": f"Unrelated page {k}."} for k in range(10)]
    for name, rank_of in (("current", lambda i, team: 1 + i % 2 if team == "billing" else 2 + i % 4),
                          ("candidate", lambda i, team: 5 + i % 4 if team == "billing" else 1 + i % 2)):
        lines = []
        for i, q in enumerate(questions):
            relevant = f"d{i:02d}"
            others = [f"x{(i + k) % 10}" for k in range(9)]  # ten documents a ranking
            ranking = [*others[:rank_of(i, q["team"]) - 1], relevant, *others[rank_of(i, q["team"]) - 1:]]
            lines += [f"{q['qid']} Q0 {doc} {rank} {10 - rank} {name}\n" for rank, doc in enumerate(ranking, 1)]
        (HERE / f"{name}.trec").write_text("".join(lines), encoding="utf-8")
    with (HERE / "questions.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["qid", "question", "team"])
        writer.writeheader()
        writer.writerows(questions)
    with (HERE / "judgments.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["qid", "doc", "grade"])
        writer.writeheader()
        writer.writerows(judgments)
    (HERE / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")


if __name__ == "__main__":
    main()
