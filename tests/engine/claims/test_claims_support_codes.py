"""An argument written as a standard short code (an airport, currency, country or state code) is the
agent's conversion of the user's words: WEAK (unverifiable), not MISSING (invented)."""

from __future__ import annotations

from pathlib import Path

import trajaudit

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "traces" / "openai_chat.json"


def test_airport_codes_for_city_names_are_not_invented_and_the_example_blames_the_booking():
    d = trajaudit.audit(EXAMPLE)  # "Lisbon to Porto" searched as LIS -> OPO, then TP1940 booked unconfirmed
    assert (d.critical_step, d.category) == (4, "instruction_adherence_failure")
    assert "LIS" not in d.rationale


def test_codes_with_digits_or_longer_words_stay_checked():
    def run(origin):
        return {"messages": [
            {"role": "user", "content": "Book the cheapest flight from Lisbon to Porto."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "book_flight", "arguments": '{"origin": "%s"}' % origin}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "book_flight", "content": '{"status": "ok"}'}]}

    for code, invented in (("LIS", False), ("USD", False), ("LIS9", True), ("LISBOA", True), ("W12345", True)):
        d = trajaudit.audit(run(code))
        assert (d.category == "invention_of_new_information" and d.critical_step == 1) is invented, (code, d.rationale)
