"""Who is speaking in a chat log: the human side, or other agents of a group chat.

Chat formats (OpenAI messages, ``--mapping`` formats) carry only ``role`` and an optional ``name``,
and multi-agent frameworks bend them: AutoGen logs a group chat from one agent's side (every other
agent, and the code runner, as a named ``user`` message), and the initiator's history from the human
proxy's side (the proxy as ``assistant``, the LLM as ``user``). This module decides, per run, which
names are agents and which the human (docs/judge.md "Format invariance"); ``base.classify_openai``
then classifies each message with the sets it returns. The Who&When adapter uses
:func:`is_human_name` for role-encoded speakers.
"""

from __future__ import annotations

import re
from typing import Any

from trajaudit.engine.trace.adapters.base import LoadOptions

# Speaker names that denote the human side of a conversation, not an agent (AutoGen's human proxies
# are conventionally "user_proxy", "human_proxy" or "Admin"). Compared by :func:`is_human_name`: any
# case, spaces/underscores/hyphens ignored ("User Proxy", "user-proxy", "UserProxy").
HUMAN_NAMES = frozenset({"human", "user", "customer", "client", "user_proxy", "userproxy", "human_proxy", "admin"})
_SEPARATORS = re.compile(r"[\s_\-]+")
_HUMAN_KEYS = frozenset(_SEPARATORS.sub("", n) for n in HUMAN_NAMES)


def is_human_name(name: str) -> bool:
    """Whether the speaker name ``name`` is one of :data:`HUMAN_NAMES` (any case; spaces,
    underscores and hyphens ignored)."""
    return _SEPARATORS.sub("", name.casefold()) in _HUMAN_KEYS


def human_speakers(messages: list[Any], options: LoadOptions) -> frozenset[str]:
    """The names (stripped) of ``assistant`` messages that are the human's turns: the log is written
    from the human proxy's side.

    AutoGen records a chat in each participant's own terms: the initiator's history (``user_proxy``'s
    ``chat_messages``, which ``initiate_chat(...).chat_history`` returns) gives the human proxy's turns
    as ``assistant`` messages named ``user_proxy`` and the LLM agent's turns as ``user`` messages
    named after it. An ``assistant`` message without tool calls whose ``name`` is a human name
    (:func:`is_human_name`) is therefore the user's turn, and every other speaker the log names on a
    ``user`` message is an agent (:func:`group_chat_agents`). Empty with
    ``options.named_users == "user"`` (no message is read against its logged role).
    """
    if options.named_users == "user":
        return frozenset()
    return frozenset(m["name"].strip() for m in messages
                     if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("name"), str)
                     and not m.get("tool_calls") and is_human_name(m["name"]))


def speaker_sets(messages: list[Any], options: LoadOptions) -> tuple[frozenset[str], frozenset[str]]:
    """``(agent_users, user_speakers)`` of a chat run — :func:`group_chat_agents` and
    :func:`human_speakers`, the latter computed once for both — as ``base.classify_openai`` takes them."""
    proxies = human_speakers(messages, options)
    return group_chat_agents(messages, options, proxies=proxies), proxies


def group_chat_agents(messages: list[Any], options: LoadOptions, *,
                      proxies: frozenset[str] | None = None) -> frozenset[str]:
    """The speaker names of a chat run's ``user`` messages that are other agents, not the user.

    Multi-agent frameworks log a group chat from one agent's side: its own turns are ``assistant``
    messages, every other agent's turn a ``user`` message carrying the speaker's ``name`` (AutoGen;
    Who&When's raw logs do this for 216 speakers; the code executor speaks there as a named ``user``
    too). A human user, by contrast, speaks under one name at most. So, with
    ``options.named_users == "auto"``, a name on ``user`` messages is an agent when the run's ``user``
    messages carry two or more distinct names (a code runner's name counts: it makes the user side
    a group), when the same name also speaks as ``assistant``, or when the log is the human proxy's
    (:func:`human_speakers`). Names are compared ignoring case and surrounding spaces ("Alice" and
    "alice " are one speaker). Never agents: names matching ``options.tool_agent_pattern`` (those
    messages are tool outputs) and human names (:func:`is_human_name`: ``user``, ``human``,
    ``customer``, ``client``, ``user_proxy``, ``human_proxy``, ``admin``; they do not count towards the
    two names either).

    Known limit: a human who gives a name *and* a separately named code runner on ``user`` messages
    read as a group (the runner makes two names); a mapping file's ``named_users: user`` forces the
    human reading.

    Args:
        messages: the raw message objects (non-objects are ignored here; ``build_steps`` reports them).
        options: the load options (``named_users``: ``"auto"``, ``"agent"``: every such name,
            ``"user"``: none).
        proxies: :func:`human_speakers` of the same messages, when the caller has it (else computed).

    Returns:
        The names (stripped, as spelled in the messages), empty when named ``user`` messages are user
        turns.
    """
    if options.named_users == "user":
        return frozenset()
    users: dict[str, None] = {}  # candidate agents, in order of appearance
    user_keys: set[str] = set()  # every non-human name on a user message (code runners included), case-folded
    speakers: set[str] = set()  # case-folded names of assistant messages
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("name"), str):
            continue
        name = m["name"].strip()
        if not name:
            continue
        if m.get("role") == "assistant":
            speakers.add(name.casefold())
        elif m.get("role") == "user" and not is_human_name(name):
            user_keys.add(name.casefold())
            if not options.tool_agent_pattern.match(name):
                users[name] = None
    if proxies is None:
        proxies = human_speakers(messages, options)
    if options.named_users == "agent" or len(user_keys) >= 2 or proxies:
        return frozenset(users)
    return frozenset(n for n in users if n.casefold() in speakers)
