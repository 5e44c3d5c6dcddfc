"""The ten task templates of the workspace workload (private to :mod:`harness.bench.workload`).

A template picks documents from a seeded store and builds, by construction, everything a task
needs: the prompt (it names every key and value, so a small model can do it), the task
inputs the manifest's ``input:FIELD`` sources refer to, the gold steps as ``(phase, group)``
pairs (a group is one certified window, or one call that cannot join a window), the gold
answer with the phrases an answer must and must not contain, and the expected final store,
edited directly on the store (not through the tools, so applying the gold calls through the
tools is an independent check). A template returns ``None`` when the store cannot host it
(the generator then tries the next store seed).

In every phase with a conflict, the conflicting call is the *last* call of its phase, so the
window sizes do not depend on whether a tracker lets a conflicting call open a new window.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.loop.task import GoldCall
from harness.toolsets.workspace import OWNERS, STATUSES, WorkspaceState
from harness.toolsets.workspace.store import Document

__all__ = ("TEMPLATES", "Built", "Template", "edited")

NEW_TAGS = ("urgent", "audit", "customer", "q3", "board")
NOTE_TEXTS = (
    "checked",
    "sent to legal",
    "needs a second review",
    "budget confirmed",
    "follow up next week",
    "owner notified",
    "numbers verified",
    "copy archived",
)
SYSTEM_PROMPT = (
    "You work in a document workspace through tools. Every document has a key (like d417), "
    "a title, an owner, a status (draft, review, approved or archived), a priority from 1 "
    "to 5, tags, next (the key of the next document in its chain, or null) and notes. Do "
    "exactly what the user asks with the tools it names, using the keys and values it gives "
    "verbatim. When the work is done, reply with a short final answer."
)


@dataclass(frozen=True)
class Built:
    """What a template builds for one task (see the module docstring)."""

    prompt: str
    inputs: dict[str, Any]
    steps: tuple[tuple[str, tuple[GoldCall, ...]], ...]
    answer: str
    expect: tuple[str, ...]
    forbid: tuple[str, ...]
    final: WorkspaceState


Template = Callable[[WorkspaceState, random.Random, Sequence[int]], Built | None]


def edited(
    state: WorkspaceState, keys: Sequence[str], edit: Callable[[Document], dict[str, Any]]
) -> WorkspaceState:
    """A copy of ``state`` with the fields ``edit(document)`` gives set on each of ``keys``:
    the expected store, edited directly (not through the tools)."""
    final = state.copy()
    for key in keys:
        final.update(key, **edit(final.get(key)))
    return final


def _and(items: Sequence[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def _call(name: str, **arguments: Any) -> GoldCall:
    return GoldCall(name, arguments)


def _reads(keys: Sequence[str]) -> tuple[GoldCall, ...]:
    return tuple(_call("read_doc", key=k) for k in keys)


def _chain_start(state: WorkspaceState, rng: random.Random, reads: int) -> list[str] | None:
    starts = [k for k in state if len(state.chain(k, reads + 1)) == reads + 1]
    if not starts:
        return None
    return state.chain(rng.choice(starts), reads)


def _follow_text(chain: Sequence[str]) -> str:
    return (
        f"Start at document {chain[0]}. Read it with read_doc, then read the document named "
        "in its 'next' field, and keep following 'next' until you have read "
        f"{len(chain)} documents in total (counting {chain[0]})."
    )


# -------------------------------------------------------------------------------- fan-out


def survey(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (n,) = params
    docs = [state.get(k) for k in state]
    candidates = [d for d in docs if sum(o.priority < d.priority for o in docs) >= n - 1]
    if not candidates:
        return None
    best = rng.choice(candidates)
    keys = [*rng.sample([d.key for d in docs if d.priority < best.priority], n - 1), best.key]
    rng.shuffle(keys)
    return Built(
        prompt=(
            f"Read each of these {n} documents with read_doc: {_and(keys)}. Then answer with "
            "the key of the one that has the highest priority."
        ),
        inputs={"keys": keys},
        steps=(("read", _reads(keys)),),
        answer=best.key,
        expect=(best.key,),
        forbid=tuple(k for k in keys if k != best.key),
        final=state.copy(),
    )


def set_status_all(
    state: WorkspaceState, rng: random.Random, params: Sequence[int]
) -> Built | None:
    (n,) = params
    status = rng.choice(STATUSES)
    candidates = [k for k in state if state.get(k).status != status]
    if len(candidates) < n:
        return None
    keys = rng.sample(candidates, n)
    final = edited(state, keys, lambda d: {"status": status})
    return Built(
        prompt=(
            f"Set the status of each of these {n} documents to '{status}' with set_status: "
            f"{_and(keys)}. Then reply 'done'."
        ),
        inputs={"keys": keys, "status": status},
        steps=(("update", tuple(_call("set_status", key=k, status=status) for k in keys)),),
        answer="done",
        expect=(),
        forbid=(),
        final=final,
    )


def tag_all(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (n,) = params
    tag = rng.choice(NEW_TAGS)
    keys = rng.sample(state.keys(), n)
    final = edited(state, keys, lambda d: {"tags": tuple(sorted({*d.tags, tag}))})
    return Built(
        prompt=(
            f"Add the tag '{tag}' to each of these {n} documents with add_tag: {_and(keys)}. "
            "Then reply 'done'."
        ),
        inputs={"keys": keys, "tag": tag},
        steps=(("tag", tuple(_call("add_tag", key=k, tag=tag) for k in keys)),),
        answer="done",
        expect=(),
        forbid=(),
        final=final,
    )


def annotate_each(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (n,) = params
    text = rng.choice(NOTE_TEXTS)
    keys = rng.sample(state.keys(), n)
    final = edited(state, keys, lambda d: {"notes": (*d.notes, text)})
    return Built(
        prompt=(
            f"Append the note '{text}' to each of these {n} documents with append_note: "
            f"{_and(keys)}. Then reply 'done'."
        ),
        inputs={"keys": keys, "text": text},
        steps=(("annotate", tuple(_call("append_note", key=k, text=text) for k in keys)),),
        answer="done",
        expect=(),
        forbid=(),
        final=final,
    )


# ---------------------------------------------------------------------------------- chain


def follow(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (k,) = params
    chain = _chain_start(state, rng, k)
    if chain is None:
        return None
    beyond = state.get(chain[-1]).next
    near = [chain[-2]] + ([beyond] if beyond else [])
    last = state.get(chain[-1])
    return Built(
        prompt=(f"{_follow_text(chain)} Answer with the title of the last document you read."),
        inputs={"start": chain[0], "reads": k},
        steps=tuple(("follow", (_call("read_doc", key=c),)) for c in chain),
        answer=last.title,
        expect=(last.title,),
        forbid=tuple(state.get(key).title for key in near),
        final=state.copy(),
    )


def follow_mark(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    (k,) = params
    chain = _chain_start(state, rng, k)
    if chain is None:
        return None
    last = state.get(chain[-1])
    status = rng.choice([s for s in STATUSES if s != last.status])
    final = state.copy()
    final.update(last.key, status=status)
    return Built(
        prompt=(
            f"{_follow_text(chain)} Then set the status of the last document you read to "
            f"'{status}' with set_status. Answer with the key of that document."
        ),
        inputs={"start": chain[0], "reads": k, "status": status},
        steps=(
            *(("follow", (_call("read_doc", key=c),)) for c in chain),
            ("mark", (_call("set_status", key=last.key, status=status),)),
        ),
        answer=last.key,
        expect=(last.key,),
        forbid=(chain[-2],),
        final=final,
    )


# ---------------------------------------------------------------------------------- mixed


def triage(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    n, m = params
    review = [k for k in state if state.get(k).status == "review"]
    others = [k for k in state if state.get(k).status != "review"]
    if len(review) < m or len(others) < n - m + 1:
        return None
    picked = rng.sample(review, m)
    keys = picked + rng.sample(others, n - m)
    rng.shuffle(keys)
    log = rng.choice([k for k in state if k not in keys])
    note = rng.choice(NOTE_TEXTS)
    approved = [k for k in keys if k in picked]
    final = state.copy()
    for key in approved:
        final.update(key, status="approved")
    final.update(log, notes=(*final.get(log).notes, note))
    return Built(
        prompt=(
            f"Read these {n} documents with read_doc: {_and(keys)}. Then, for every one of "
            "them whose status is 'review', set its status to 'approved' with set_status "
            f"(leave the others alone). Finally append the note '{note}' to document {log} "
            "with append_note. Answer with the keys of the documents you approved."
        ),
        inputs={"keys": keys, "to_status": "approved", "log": log, "note": note},
        steps=(
            ("read", _reads(keys)),
            ("approve", tuple(_call("set_status", key=k, status="approved") for k in approved)),
            ("log", (_call("append_note", key=log, text=note),)),
        ),
        answer="Approved " + _and(approved) + ".",
        expect=tuple(approved),
        forbid=tuple(k for k in keys if k not in approved),
        final=final,
    )


def trace_and_mark(
    state: WorkspaceState, rng: random.Random, params: Sequence[int]
) -> Built | None:
    (k,) = params
    chain = _chain_start(state, rng, k)
    if chain is None:
        return None
    status = rng.choice(STATUSES)
    final = state.copy()
    for key in chain:
        final.update(key, status=status)
    return Built(
        prompt=(
            f"{_follow_text(chain)} Then set the status of every document you read to "
            f"'{status}' with set_status, in the order you read them. Then reply 'done'."
        ),
        inputs={"start": chain[0], "reads": k, "status": status},
        steps=(
            *(("follow", (_call("read_doc", key=c),)) for c in chain),
            ("mark", tuple(_call("set_status", key=c, status=status) for c in chain)),
        ),
        answer="done",
        expect=(),
        forbid=(),
        final=final,
    )


def review_notes(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    n, d = params
    keys = rng.sample(state.keys(), n)
    targets = rng.sample(keys, d)
    texts = rng.sample(NOTE_TEXTS, d + 1)
    notes = [(targets[i], texts[i]) for i in range(d)] + [(targets[-1], texts[d])]
    calls = tuple(_call("append_note", key=key, text=text) for key, text in notes)
    final = state.copy()
    for key, text in notes:
        final.update(key, notes=(*final.get(key).notes, text))
    title = state.get(keys[0]).title
    listing = "; ".join(f"'{text}' to {key}" for key, text in notes)
    return Built(
        prompt=(
            f"Read these {n} documents with read_doc: {_and(keys)}. Then append these notes "
            f"with append_note, in this order: {listing}. Answer with the title of "
            f"document {keys[0]}."
        ),
        inputs={"keys": keys, "notes": [{"key": key, "text": text} for key, text in notes]},
        steps=(
            ("read", _reads(keys)),
            ("annotate", calls[:-1]),  # distinct documents: disjoint, so they commute
            ("annotate", calls[-1:]),  # a second note on the same document: order matters
        ),
        answer=title,
        expect=(title,),
        forbid=tuple(state.get(k).title for k in keys[1:]),
        final=final,
    )


def handover(state: WorkspaceState, rng: random.Random, params: Sequence[int]) -> Built | None:
    r, w = params
    picked = rng.sample(state.keys(), r + w)
    a, checked, others, log = picked[0], picked[1:r], picked[r : r + w - 1], picked[-1]
    writes = [*others, a]  # a is written last: its owner is read first in the same phase
    used = {state.get(k).owner for k in writes}
    owner = rng.choice([o for o in OWNERS if o not in used])
    note = f"handed over to {owner}"
    old_owner = state.get(a).owner
    statuses = [state.get(k).status for k in checked]
    gets = (
        _call("get_field", key=a, field="owner"),
        *(_call("get_field", key=k, field="status") for k in checked),
    )
    sets = tuple(_call("set_owner", key=k, owner=owner) for k in writes)
    final = state.copy()
    for key in writes:
        final.update(key, owner=owner)
    final.update(log, notes=(*final.get(log).notes, note))
    looked = [f"the owner of {a}"] + [f"the status of {k}" for k in checked]
    answer = f"{a} was owned by {old_owner}" + "".join(
        f"; {k} is {s}" for k, s in zip(checked, statuses, strict=True)
    )
    return Built(
        prompt=(
            f"First, with get_field, look up {_and(looked)}. Then, with set_owner, make "
            f"'{owner}' the owner of {_and(writes)}, in that order. Finally append the note "
            f"'{note}' to document {log} with append_note. Answer with what get_field "
            "returned."
        ),
        inputs={
            "checks": [{"key": a, "field": "owner"}]
            + [{"key": k, "field": "status"} for k in checked],
            "keys": writes,
            "owner": owner,
            "log": log,
            "note": note,
        },
        steps=(
            ("handover", gets + sets[:-1]),  # reads and writes of disjoint fields commute
            ("handover", sets[-1:]),  # writes the owner of a, which the first read reads
            ("log", (_call("append_note", key=log, text=note),)),
        ),
        answer=answer + ".",
        expect=(old_owner, *statuses),
        forbid=(),
        final=final,
    )


#: Template name (= manifest skill) -> builder.
TEMPLATES: dict[str, Template] = {
    "survey": survey,
    "set_status_all": set_status_all,
    "tag_all": tag_all,
    "annotate_each": annotate_each,
    "follow": follow,
    "follow_mark": follow_mark,
    "triage": triage,
    "trace_and_mark": trace_and_mark,
    "review_notes": review_notes,
    "handover": handover,
}
