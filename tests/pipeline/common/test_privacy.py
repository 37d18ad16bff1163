"""What a production question may carry about a person is masked, by the rules pipeline.common.privacy states, and
nothing else is touched."""

from __future__ import annotations

import pytest

from pipeline.common.privacy import mask, masked


@pytest.mark.parametrize("text, expected, rule", [
    ("mail me at john.doe+billing@example.co.uk please", "mail me at <email> please", "email"),
    ("my card 4111 1111 1111 1111 was charged twice", "my card <card> was charged twice", "card"),
    ("card 4111-1111-1111-1111", "card <card>", "card"),
    ("refund to GB82 WEST 1234 5698 7654 32", "refund to <iban>", "iban"),
    ("refund to DE89370400440532013000 now", "refund to <iban> now", "iban"),
    ("call me on +44 20 7946 0958", "call me on <phone>", "phone"),
    ("call (555) 123-4567 or 555.123.4567", "call <phone> or <phone>", "phone"),
    ("my ssn is 123-45-6789", "my ssn is <number>", "number"),
    ("order 123456789012 is late", "order <number> is late", "number"),
    ("my password=hunter2hunter2 does not work", "my password=*** does not work", "secret"),
    ("the key ghp_abcdefghijklmnopqrstuvwxyz0123 leaked", "the key *** leaked", "secret"),
    # a letters-only OpenAI key and a Stripe key: before, the first was kept whole, the second all but its digits
    ("my key sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN fails", "my key *** fails", "secret"),
    ("charged with sk_live_51HabcdEFGHijklMNOPqrstUVWXyz0123456789abcdefGHIJ", "charged with ***", "secret"),
])
def test_each_rule_masks_what_it_names(text, expected, rule):
    found, counts = mask(text)
    assert found == expected
    assert counts[rule] >= 1 and sum(counts.values()) == counts[rule]


@pytest.mark.parametrize("text", [
    "how much does the Pro plan cost in 2024",
    "what changed between 3.17.2 and 3.18 on 2026-12-04",
    "is 1,000,000 requests a month within the quota",
    "card 4111 1111 1111 1112 (not a card number: the Luhn check fails)",
    "GB00 WEST 1234 5698 7654 32 fails its check digits",
    "ticket 12345678 is eight digits",
    "",
])
def test_years_dates_amounts_versions_and_failed_checks_are_kept(text):
    assert masked(text) == text


def test_masking_twice_changes_nothing():
    once = masked("write to a@b.io or +1 415 555 0100 about 4111111111111111")
    assert once == "write to <email> or <phone> about <card>" and masked(once) == once
