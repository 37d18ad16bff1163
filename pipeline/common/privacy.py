"""Mask what a production question may carry about a person before it leaves the traces: secrets, e-mail
addresses and numbers that look like personal data. A question set made from traces (``python -m pipeline.questions
from-traces``) holds only masked texts; the masks are typed, so a judge still reads what the question was about.

The rules, applied in this order (each placeholder is what replaces a match):

- secrets, as everything rankscope logs is masked (:func:`pipeline.common.redact.redact_text`: credentials in URIs,
  ``password=...``-style pairs, bearer tokens, known token shapes): ``***``;
- e-mail addresses: ``<email>``;
- IBANs (two letters, two check digits, 11 to 30 letters or digits, spaces allowed, the ISO 13616 check passing):
  ``<iban>``;
- payment card numbers (13 to 19 digits, single spaces or dashes allowed between them, the Luhn check passing):
  ``<card>``;
- phone numbers: ``+`` then 8 to 15 digits (spaces, dots, dashes and parentheses between them), or ten digits
  written 3-3-4 (``555-123-4567``, ``(555) 123 4567``): ``<phone>``;
- US social security numbers (``123-45-6789``): ``<number>``;
- any other run of 9 or more digits (account, order and national id numbers): ``<number>``.

Shorter numbers (years, dates, amounts, versions) are kept: a question's meaning often lies in them.
"""

from __future__ import annotations

import re
from collections import Counter

from pipeline.common.redact import MASK, redact_text

EMAIL, IBAN, CARD, PHONE, NUMBER = "<email>", "<iban>", "<card>", "<phone>", "<number>"
RULES = ("secret", "email", "iban", "card", "phone", "number")  # what mask() counts, in the order applied

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])\+\d(?:[ .()-]{0,2}\d){7,14}(?!\d)"
                    r"|(?<![\w(])(?:\(\d{3}\)\s?|\d{3}[-. ])\d{3}[-. ]\d{4}(?!\d)")
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")
_DIGITS = re.compile(r"\d{9,}")


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _iban_valid(text: str) -> bool:
    code = text.replace(" ", "")
    if not 15 <= len(code) <= 34:
        return False
    moved = code[4:] + code[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def mask(text: str) -> tuple[str, Counter]:
    """``text`` with every match of the module's rules replaced by its placeholder, and how many of each rule's
    matches were masked (keys from :data:`RULES`)."""
    counts: Counter = Counter()
    redacted = redact_text(text)
    if redacted != text:
        counts["secret"] += redacted.count(MASK) - text.count(MASK)
        text = redacted

    def replace(pattern: re.Pattern[str], placeholder: str, rule: str, check=None) -> None:
        nonlocal text

        def one(match: re.Match[str]) -> str:
            found = match.group(0)
            if check is not None and not check(found):
                return found
            counts[rule] += 1
            return placeholder

        text = pattern.sub(one, text)

    replace(_EMAIL, EMAIL, "email")
    replace(_IBAN, IBAN, "iban", _iban_valid)
    replace(_CARD, CARD, "card", lambda found: _luhn(re.sub(r"\D", "", found)))
    replace(_PHONE, PHONE, "phone")
    replace(_SSN, NUMBER, "number")
    replace(_DIGITS, NUMBER, "number")
    return text, counts


def masked(text: str) -> str:
    """:func:`mask`'s text alone."""
    return mask(text)[0]
