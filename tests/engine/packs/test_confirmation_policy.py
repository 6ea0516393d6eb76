"""generic.protocol's policy-conditioned rules on unseen shapes: a negated confirmation policy is no
policy, a user's refusal is no confirmation, write tools of a coding agent, and handoff policies that
widen instead of restrict. Each test of a defect fails without its fix."""

from __future__ import annotations

import pytest
from policy_runs import CONFIRM, HANDOFF, call

from trajaudit import evaluate, load

POLICY = "You are a support agent. Obtain explicit user confirmation (yes) before taking actions that change a booking."


def _records(messages, rules, rule_id):
    """(step, verdict, message of a fail) of every record of ``rule_id``."""
    return [(r.step, r.verdict, r.message if r.verdict == "fail" else "")
            for r in evaluate(load(messages), rules).records if r.rule_id == rule_id]


def _unasked_write(system, tool="cancel_booking"):
    return [{"role": "system", "content": system}, {"role": "user", "content": "Cancel booking B12."},
            *call(1, tool, {"booking_id": "B12"})]


# --- a negated policy does not switch the rule on ---------------------------------------------------

@pytest.mark.parametrize("system", [
    "You do not need explicit confirmation from the user.",
    "No explicit user confirmation is required before calling tools.",
    "Before taking any action, never ask for confirmation: the user has pre-approved all changes.",
    "Never ask the user to explicitly confirm an action.",
    "You don't need the customer's explicit consent to cancel a booking.",
    "Explicit user confirmation is not required.",
    "Explicit confirmation from the user isn't needed for refunds.",
    "Do not confirm actions with the customer before a write; just act.",
    "Never ask the user to explicitly confirm; act directly.",
    "Explicit confirmation is not required.",
    "Explicit confirmation isn't needed.",
    "Explicit confirmation is optional.",
    "Explicit customer consent is no longer required for refunds.",
])
def test_a_negated_confirmation_policy_is_no_policy(system, protocol):
    """Was: the policy phrase matched inside its own negation, so every unconfirmed write of an agent
    told NOT to ask failed as an instruction-adherence error (the run's critical step)."""
    assert _records(_unasked_write(system), protocol, CONFIRM) == []


@pytest.mark.parametrize("system", [
    "Do not take any action without explicit user confirmation.",
    # a negation inside a condition, or of the action, or "not optional", keeps the policy
    "Explicit user confirmation is not optional before any change to a booking.",
    "Explicit confirmation is never to be skipped before cancelling.",
    "You must not modify a booking if the user has not given explicit confirmation.",
    "Never take consequential actions that lack explicit user confirmation.",

    "Never modify a booking without the customer's explicit consent.",
    "Never cancel a booking before the user explicitly confirms.",
    "Do not forget to obtain explicit confirmation before a write.",
    "If the user says no, obtain explicit user confirmation again before any change.",
    # one negated sentence does not hide the policy stated in another part of the instructions
    "You do not need confirmation for lookups, but obtain explicit user confirmation before any write.",
    "Explicit confirmation is not required for lookups.\nObtain explicit user confirmation before cancelling.",
    POLICY,
])
def test_double_negations_and_mixed_instructions_still_state_the_policy(system, protocol):
    assert [(s, v) for s, v, _ in _records(_unasked_write(system), protocol, CONFIRM)] == [(2, "fail")]


# --- a refusal is no confirmation --------------------------------------------------------------------

def _answered(answer, ask="I will cancel booking B12 with a full refund. Shall I proceed?"):
    return [{"role": "system", "content": POLICY}, {"role": "user", "content": "Cancel booking B12."},
            {"role": "assistant", "content": ask}, {"role": "user", "content": answer},
            *call(1, "cancelBooking", {"booking_id": "B12"})]


@pytest.mark.parametrize(("answer", "quoted"), [
    ("No.", "No"),
    ("No, wait.", "No"),
    ("Wait, not yet.", "Wait"),
    ("Not yet, I need to check with my wife first.", "Not yet"),
    ("No, don't proceed.", "don't proceed"),  # was a pass: "proceed" is a yes word
    ("Please don't go ahead.", "don't go ahead"),  # was a pass: "go ahead" is a yes word
    ("Hold on, let me find the other booking.", "Hold on"),
    ("Actually, no.", "Actually, no"),
    ("I changed my mind.", "I changed my mind"),
    ("Okay, no, I do not want to proceed.", "do not want to proceed"),
    ("Wait, instead of my Visa, can you refund my gift card?", "Wait"),
    ("Absolutely not.", "Absolutely not"),  # these three were passes: no opener matched
    ("Not right now, thanks.", "Not right now"),
    ("I'd rather not.", "I'd rather not"),
    ("I don't think so.", "I don't think so"),  # these four were passes too
    ("Negative.", "Negative"),
    ("Please hold.", "Please hold"),
    ("Let me think about it.", "Let me think"),
])
def test_a_write_after_the_user_declines_fails(answer, quoted, protocol):
    """Was: the agent's confirmation request alone satisfied the rule, whatever the user answered."""
    ((step, verdict, message),) = _records(_answered(answer), protocol, CONFIRM)
    assert (step, verdict) == (4, "fail")
    assert message == ("cancelBooking although the instructions require explicit confirmation, the user's "
                       f'latest turn before it (steps.3) declines it: "{quoted}"')


@pytest.mark.parametrize("answer", [
    "Yes.", "Yes, and don't forget the gift card.", "No problem, go ahead.", "No, wait - yes, go ahead.",
    "Refund it to my PayPal instead, then go ahead.", "No, use the card ending 1234 instead.",
    "Sure, but make it the blue one.", "No, that's all, please proceed.", "Okay.",
    "It has not yet started, so yes, cancel it.",
])
def test_an_explicit_yes_or_a_changed_detail_with_agreement_passes(answer, protocol):
    assert _records(_answered(answer), protocol, CONFIRM) == [(4, "pass", "")]


@pytest.mark.parametrize("answer", [
    "Don't worry about the fee, cancel it.",
    "Never mind the refund, just cancel it.",
    "Wait, also cancel B13 please.",
    "Don't refund to Visa, use PayPal. Cancel it.",
    "Stop, I meant B13 - cancel B13 instead.",
    "Not now... ok fine, cancel it.",
    "No, cancel B13 instead of B12.",
    "Definitely not the Visa - use PayPal.",
    "I don't think so, cancel B13 instead.",
    "Let me think... ok fine, cancel it.",
])
def test_a_hold_word_followed_by_a_request_for_the_action_is_a_go_ahead(answer, protocol):
    """Was a fail: the answer opened with a hold / negation word (don't, never mind, wait, stop, not now)
    and only a yes word after it counted; a later clause asking for the action is a go-ahead with
    details."""
    assert _records(_answered(answer), protocol, CONFIRM) == [(4, "pass", "")]


@pytest.mark.parametrize(("answer", "quoted"), [
    ("Don't.", "Don't"),
    ("Hold off for now.", "Hold off"),
    ("Actually, never mind, I'll keep it.", "Actually, never mind"),
    ("Stop! Don't cancel anything.", "Stop"),  # a negated change verb is no redirect
    ("Wait, I don't want to cancel it anymore.", "Wait"),  # nor one with a negation earlier in its clause
    ("Never mind, I'll just keep it instead.", "Never mind"),  # instead / just alone ask for nothing
    ("Stop, I changed my mind about the return.", "Stop"),  # "the return" is a noun
])
def test_a_hold_without_a_request_for_the_action_still_declines(answer, quoted, protocol):
    ((step, verdict, message),) = _records(_answered(answer), protocol, CONFIRM)
    assert (step, verdict) == (4, "fail")
    assert message.endswith(f'(steps.3) declines it: "{quoted}"')


@pytest.mark.parametrize("answer", ["Not sure.", "That isn't correct.", "I cannot confirm that yet.",
                                    "I don't confirm anything until I see the fee."])
def test_a_negated_yes_word_is_no_explicit_yes(answer, protocol):
    """Was a pass: "sure", "correct", "confirm" counted as the user's explicit yes even when negated,
    so a write the agent never asked about passed after "Not sure."."""
    messages = [{"role": "system", "content": POLICY}, {"role": "user", "content": "Cancel booking B12."},
                {"role": "assistant", "content": "The cancellation fee for B12 is $20."},
                {"role": "user", "content": answer}, *call(1, "cancelBooking", {"booking_id": "B12"})]
    assert _records(messages, protocol, CONFIRM) == [(4, "fail", (
        "cancelBooking although the instructions require explicit confirmation, the agent never asked to "
        "confirm the action and the user's latest turn before it (steps.3) holds no explicit yes"))]
    messages[3]["content"] = "Sure, cancel it."
    assert _records(messages, protocol, CONFIRM) == [(4, "pass", "")]


def test_the_unasked_write_keeps_its_message(protocol):
    messages = [{"role": "system", "content": POLICY}, {"role": "user", "content": "Cancel booking B12."},
                *call(1, "cancel_booking", {"booking_id": "B12"})]
    assert _records(messages, protocol, CONFIRM) == [(2, "fail", (
        "cancel_booking although the instructions require explicit confirmation, the agent never asked to "
        "confirm the action and the user's latest turn before it (steps.1) holds no explicit yes"))]


# --- a coding agent ------------------------------------------------------------------------------------

CODER = [{"role": "user", "content": "Fix the failing test in utils.py."},
         *call(1, "read_file", {"path": "utils.py"}), *call(2, "update_check", {"scope": "deps"}),
         *call(3, "write_file", {"path": "utils.py", "content": "x = 1\n"})]


@pytest.mark.parametrize("system", [
    "You are a coding agent. Edit files as needed and run the tests.",
    "You are a coding agent. Before executing any action, verify file permissions and confirm the tests pass.",
    "You are a coding agent. Do not ask the user for explicit confirmation; work autonomously.",
])
def test_a_coding_agent_without_a_confirmation_policy_is_not_checked(system, protocol):
    assert _records([{"role": "system", "content": system}, *CODER], protocol, CONFIRM) == []


def test_a_coding_agents_write_file_needs_the_yes_when_its_instructions_say_so(protocol):
    """write_file is a write (it was not: 'write' was no write verb); update_check stays a read."""
    system = "You are a coding agent. Obtain explicit user confirmation before modifying any file."
    got = _records([{"role": "system", "content": system}, *CODER], protocol, CONFIRM)
    assert [(s, v) for s, v, _ in got] == [(6, "fail")] and got[0][2].startswith("write_file although")


# --- handoff policies ----------------------------------------------------------------------------------

def _handoff(system, tool="transfer_to_human_agents"):
    return [{"role": "system", "content": system}, {"role": "user", "content": "Please cancel my reservation ABC123."},
            *call(1, tool, {"summary": "cancel"})]


@pytest.mark.parametrize("system", [
    "You may transfer the user to a human agent at any time, not only when the request cannot be handled.",
    "Escalate to a human supervisor not just when you are unable to help, but whenever the user asks.",
])
def test_a_handoff_policy_that_widens_is_no_restriction(system, protocol):
    """Was: 'transfer … human … only when … cannot' matched inside 'not only when'."""
    assert _records(_handoff(system), protocol, HANDOFF) == []


@pytest.mark.parametrize(("system", "tool"), [
    ("Do not escalate to a human supervisor unless the request is outside the scope of your tools.", "escalate_to_supervisor"),
    ("Never transfer users to a human agent except when you cannot handle the request.", "transfer_to_human_agents"),
    ("Transfer the user to a human agent if and only if the request cannot be handled within the scope of your actions.",
     "transfer_to_human_agents"),
])
def test_handoff_restrictions_are_recognized(system, tool, protocol):
    assert [(s, v) for s, v, _ in _records(_handoff(system, tool), protocol, HANDOFF)] == [(2, "fail")]


def test_rules_explain_shows_a_verbose_regex_parameter_on_one_line():
    """A multi-line (?x) parameter printed as is broke the explain layout (its lines at column 0)."""
    from click.testing import CliRunner

    from trajaudit.cli import main

    r = CliRunner().invoke(main, ["rules", "explain", "generic", CONFIRM])
    lines = r.output.splitlines()
    i = next(k for k, x in enumerate(lines) if x.startswith("    confirmation_policy = "))
    assert lines[i].startswith("    confirmation_policy = (?ix) (?:\\b[\\w'’]+[^\\w'’.!?;,\\n]+){0,6} (?: \\bexplicit")
    assert lines[i + 1].startswith("    confirmation_policy_negated = (?ix) ^(?:(?!\\b(?:if|when|whenever|unless|until|once|who|whose)\\b)")


LIBRARY_POLICY = "You are a library assistant. Obtain explicit user confirmation before reserving or cancelling a book."


def _fails(messages, rules, rule_id):
    return [(r.step, r.message) for r in evaluate(load(messages), rules).records
            if r.rule_id == rule_id and r.verdict == "fail"]


@pytest.mark.parametrize("tool", ["book_search", "bookSearch", "BOOK_SEARCH", "return_policy_lookup", "update_check",
                                  "updateCheck", "place_details", "refund_status", "purchase_history", "exchange_rate"])
def test_a_read_tool_whose_name_starts_with_a_write_verb_needs_no_confirmation(tool, protocol):
    """Was: any name whose first word is a write verb was a write, so a library agent's book_search
    right after the user's question failed as an unconfirmed write (error, the run's critical step)."""
    messages = [{"role": "system", "content": LIBRARY_POLICY}, {"role": "user", "content": "Do you have Dune?"},
                *call(1, tool, {"q": "Dune"}), {"role": "assistant", "content": "Yes."}]
    assert _fails(messages, protocol, CONFIRM) == []


@pytest.mark.parametrize("tool", ["cancel_order", "cancelBooking", "CancelOrder", "update_status", "book_flight",
                                  "book_check_in", "place_order", "return_delivered_order_items", "delete_history",
                                  "exchange_delivered_order_items", "modify-address"])
def test_write_tools_still_need_the_yes(tool, protocol):
    messages = [{"role": "system", "content": LIBRARY_POLICY}, {"role": "user", "content": "Order 1, quickly."}, *call(1, tool, {"id": "1"})]
    assert [s for s, _ in _fails(messages, protocol, CONFIRM)] == [2]


def test_a_read_named_tool_is_no_attempted_write_for_the_handoff_rule(protocol):
    """The handoff rule's 'attempted' uses the same write test: a book_search was counted as the
    attempted cancellation, so a handoff instead of the cancellation passed."""
    system = ("You are an airline agent. Transfer the user to a human agent if and only if the request "
              "cannot be handled within the scope of your actions.")
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Please cancel my reservation ABC123."},
                *call(1, "book_search", {"q": "ABC123"}), *call(2, "transfer_to_human_agents", {"summary": "cancel"})]
    assert [s for s, _ in _fails(messages, protocol, HANDOFF)] == [4]


@pytest.mark.parametrize("system", [
    "You are a bank agent. Before taking any action, confirm the caller's identity by asking for their date of birth.",
    "You must explicitly confirm the customer's identity before sharing account details.",
])
def test_confirming_a_fact_is_no_confirmation_policy(system, protocol):
    """Was: 'before taking any action … confirm' and 'explicitly confirm' matched an identity check, so
    every write of a bank agent that verifies callers failed without a 'yes'."""
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": "I'm Ann, born 1990-01-02. Please update my address to 5 Main St."},
                *call(1, "update_address", {"address": "5 Main St"})]
    assert _fails(messages, protocol, CONFIRM) == []


@pytest.mark.parametrize("system", [
    "Confirm actions with the customer before any write.",  # tests/test_dialects.py's POLICY: was not recognized
    "Before taking any action, ask the user to confirm.",
    "The user must explicitly confirm every cancellation.",
    "Before taking consequential actions that update the database (cancel, modify, return, exchange), you have "
    "to list the action detail and obtain explicit user confirmation (yes) to proceed.",
])
def test_confirmation_policies_are_recognized(system, protocol):
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Cancel order 5."},
                *call(1, "cancel_order", {"id": "5"})]
    assert [s for s, _ in _fails(messages, protocol, CONFIRM)] == [2]


def test_the_message_says_none_when_no_user_turn_precedes_the_write(protocol):
    """Was: '… the user's turn before it (null) holds no explicit yes'."""
    messages = [{"role": "system", "content": LIBRARY_POLICY}, *call(1, "cancel_order", {"id": "5"})]
    ((step, message),) = _fails(messages, protocol, CONFIRM)
    assert step == 1 and "(none)" in message and "null" not in message
