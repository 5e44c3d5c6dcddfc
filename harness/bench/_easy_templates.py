"""The ``easy_fan_out`` family: small fan-out tasks a 135M model can solve (private to
:mod:`harness.bench.workload`).

Each task is one fan-out window of n = 2-4 calls of one tool over documents the prompt lists,
then a one-line answer. What makes it feasible for a small model is the same for every arm:

* an explicit prompt (the tool, the count, every key and value, the answer to give);
* a system prompt with worked examples (:data:`EASY_SYSTEM_PROMPT`), written as the calls to
  make, not as replies in one arm's format, so serial and parallel prompting read the same;
* with ``--skill-tools`` and ``--input-enums`` (:mod:`harness.loop.levers`), only the
  skill's one tool is offered and its arguments may only take the prompt's values.

The templates follow :mod:`harness.bench._templates`: each returns a
:class:`~harness.bench._templates.Built` (prompt, inputs, gold steps, answer phrases, the
expected store edited directly), or ``None`` when the store cannot host it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from harness.bench._templates import NEW_TAGS, NOTE_TEXTS, Built, Template, edited
from harness.loop.task import GoldCall
from harness.toolsets.workspace import STATUSES, WorkspaceState

__all__ = ("EASY_SYSTEM_PROMPT", "EASY_TEMPLATES", "LOOKUP_SYSTEM_PROMPT", "LOOKUP_TEMPLATES")

EASY_SYSTEM_PROMPT = (
    "You work in a document workspace through tools. Every document has a key like d417.\n"
    "The user names one tool and lists some documents. Call that tool once for each listed "
    "document, in the order listed, with the values the user gives. Never call it twice for "
    "the same document. When every listed document is done, stop calling tools and give the "
    "short final answer the user asks for.\n\n"
    "Example 1. The user says: Add the tag 'audit' to these 2 documents, one add_tag call "
    "each: d101, d102. Then reply 'done'.\n"
    'The calls, in order: add_tag {"key": "d101", "tag": "audit"}, then add_tag '
    '{"key": "d102", "tag": "audit"}. Both are done, so the final answer is: done\n\n'
    "Example 2. The user says: Read these 3 documents, one read_doc call each: d201, d202, "
    "d203. Then answer with the owner of d202.\n"
    'The calls, in order: read_doc {"key": "d201"}, read_doc {"key": "d202"}, read_doc '
    '{"key": "d203"}. All 3 are done. The result for d202 says "owner": "hugo", so the final '
    "answer is: hugo"
)


#: The ``easy_lookup`` family's system prompt: the same rules, one worked example of its task.
LOOKUP_SYSTEM_PROMPT = (
    "You work in a document workspace through tools. Every document has a key like d417.\n"
    "The user lists some documents and names one field. Call get_field once for each listed "
    "document, in the order listed, with that field. Never call it twice for the same "
    "document. When every listed document is done, stop calling tools. Then find the result "
    "whose key is the document the user asks about, and answer with that result's value only.\n\n"
    "Example. The user says: Look up the owner of these 3 documents, one get_field call each "
    "with field 'owner': d201, d202, d203. Then answer with the owner of d202.\n"
    'The calls, in order: get_field {"key": "d201", "field": "owner"}, get_field '
    '{"key": "d202", "field": "owner"}, get_field {"key": "d203", "field": "owner"}. The '
    'results are {"key": "d201", "owner": "kofi"}, {"key": "d202", "owner": "mira"} and '
    '{"key": "d203", "owner": "tomas"}. The result whose key is d202 says "owner": "mira", so '
    "the final answer is: mira"
)


def _listing(keys: Sequence[str]) -> str:
    return ", ".join(keys)


def _done(
    phase: str,
    tool: str,
    what: str,
    keys: Sequence[str],
    arguments: dict[str, str],
    final: WorkspaceState,
) -> Built:
    """A write task (manifest phase ``phase``): ``tool`` with ``arguments`` on every key, then
    the answer ``done``."""
    return Built(
        prompt=(
            f"{what} these {len(keys)} documents, one {tool} call each: {_listing(keys)}. "
            "Then reply 'done'."
        ),
        inputs={"keys": list(keys), **arguments},
        steps=((phase, tuple(GoldCall(tool, {"key": k, **arguments}) for k in keys)),),
        answer="done",
        expect=(),
        forbid=(),
        final=final,
    )


def easy_tag(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (n,) = params
    tag = rng.choice(NEW_TAGS)
    keys = rng.sample([k for k in state if tag not in state.get(k).tags], n)
    final = edited(state, keys, lambda d: {"tags": tuple(sorted({*d.tags, tag}))})
    return _done("tag", "add_tag", f"Add the tag '{tag}' to", keys, {"tag": tag}, final)


def easy_status(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (n,) = params
    status = rng.choice(STATUSES)
    candidates = [k for k in state if state.get(k).status != status]
    if len(candidates) < n:
        return None
    keys = rng.sample(candidates, n)
    final = edited(state, keys, lambda d: {"status": status})
    what = f"Set the status to '{status}' for"
    return _done("update", "set_status", what, keys, {"status": status}, final)


def easy_note(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (n,) = params
    text = rng.choice(NOTE_TEXTS)
    keys = rng.sample(state.keys(), n)
    final = edited(state, keys, lambda d: {"notes": (*d.notes, text)})
    what = f"Append the note '{text}' to"
    return _done("annotate", "append_note", what, keys, {"text": text}, final)


def _owner_question(
    state: WorkspaceState,
    rng: random.Random,
    keys: Sequence[str],
    ask: str,
    inputs: dict[str, object],
    step: tuple[str, tuple[GoldCall, ...]],
) -> Built:
    """A read-only task: ``ask`` over ``keys`` (the calls of ``step``), then answer with the
    owner of one of them, drawn at random; naming another listed owner fails the label."""
    asked = rng.choice(list(keys))
    owner = state.get(asked).owner
    return Built(
        prompt=f"{ask}: {_listing(keys)}. Then answer with the owner of {asked}.",
        inputs={"keys": list(keys), **inputs},
        steps=(step,),
        answer=owner,
        expect=(owner,),
        forbid=tuple(sorted({state.get(k).owner for k in keys} - {owner})),
        final=state.copy(),
    )


def easy_read(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (n,) = params
    keys = rng.sample(state.keys(), n)
    ask = f"Read these {n} documents, one read_doc call each"
    step = ("read", tuple(GoldCall("read_doc", {"key": k}) for k in keys))
    return _owner_question(state, rng, keys, ask, {}, step)


def easy_lookup(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    """Look up the owner (``get_field``) of each of n listed documents with n different owners,
    then answer with the owner of one of them (any position): the answer is the model's to
    pick from the results it sees, and every other listed owner is a wrong answer."""
    (n,) = params
    keys: list[str] = []  # n documents with n different owners: every answer but one is wrong
    for key in rng.sample(state.keys(), len(state.keys())):
        if state.get(key).owner not in {state.get(k).owner for k in keys}:
            keys.append(key)
    if len(keys) < n:
        return None
    keys = keys[:n]
    ask = f"Look up the owner of these {n} documents, one get_field call each with field 'owner'"
    calls = tuple(GoldCall("get_field", {"key": k, "field": "owner"}) for k in keys)
    return _owner_question(state, rng, keys, ask, {"field": "owner"}, ("lookup", calls))


#: Template name (= manifest skill) -> builder.
EASY_TEMPLATES: dict[str, Template] = {
    "easy_tag": easy_tag,
    "easy_status": easy_status,
    "easy_read": easy_read,
    "easy_note": easy_note,
}

#: ``easy_lookup``: its one template.
LOOKUP_TEMPLATES: dict[str, Template] = {"easy_lookup": easy_lookup}
