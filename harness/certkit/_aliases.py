"""Aliasing variants for the certification kit: other spellings of one resource's name.

A store that *canonicalises* names (folds case, normalises Unicode, strips whitespace,
normalises paths, parses numbers) treats ``"A"`` and ``"a"`` as one resource. If the tool's
targets are templated on the raw argument (or declare a weaker ``canonical=`` fold than the
store applies), two calls that write one resource get disjoint targets and certify as
independent: a false fill. The kit's generators would never find it, because they draw the
example values as given. This module makes the variants:

:func:`alias_variants`  other spellings of a value: case (upper, lower, swapped, title),
                        Unicode (NFC, NFD, NFKC; a full-width form, which NFKC folds),
                        surrounding whitespace, path forms (``./a``, ``a/``, ``a/./b``,
                        ``a//b``) and numeric forms (``1``, ``1.0``, ``"1"``);
:func:`target_arguments` the arguments of a tool that feed its targets;
:func:`alias_table`     per ``tool.argument``, the variants of its example values (the kit
                        draws them beside the examples, so ``commutes`` meets windows such as
                        ``set("a")`` with ``set("A")``);
:func:`check_targets_canonical` the ``targets_canonical`` claim: a call and its variant that
                        change the same resource of the store declare overlapping targets.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from harness.certkit._base import Falsified, KitView, changed_resources
from harness.certkit._report import ClaimResult, Counterexample, Outcome
from harness.conflicts import overlaps
from harness.effects import FOLD_STEPS, Fold, template_fields
from harness.tools import Tool

__all__ = ("alias_table", "alias_variants", "check_targets_canonical", "target_arguments")

_FULL_WIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}  # '!'..'~' -> U+FF01..U+FF5E


def _string_variants(text: str) -> list[str]:
    out = [text.upper(), text.lower(), text.swapcase(), text.title()]
    out += [unicodedata.normalize(form, text) for form in ("NFC", "NFD", "NFKC")]
    out.append(text.translate(_FULL_WIDTH))
    out += [f" {text}", f"{text} ", f"\t{text}\n"]
    if "/" in text:
        out += [text.replace("/", "/./", 1), text.replace("/", "//", 1), f"./{text}", f"{text}/"]
    elif text:
        out += [f"./{text}", f"{text}/"]
    stripped = text.strip()
    try:
        number = float(stripped)
    except ValueError:
        return out
    if number.is_integer() and abs(number) < 2**53:
        out += [int(number), float(number)]  # type: ignore[list-item]
    return out


def alias_variants(value: Any) -> list[Any]:
    """Other spellings a store might take for ``value`` (``value`` itself left out, no
    repeats, in a fixed order). Booleans, lists and objects have none."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str):
        candidates: list[Any] = _string_variants(value)
    elif isinstance(value, int):
        candidates = [float(value), str(value)]
    elif isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        candidates = [int(value), str(int(value)), repr(value)]
    else:
        return []
    out: list[Any] = []
    seen = {(type(value), value)}
    for candidate in candidates:
        key = (type(candidate), candidate)
        if key not in seen:
            seen.add(key)
            out.append(candidate)
    return out


def target_arguments(tool: Tool) -> list[str]:
    """The arguments whose values go into the tool's target names (every argument when a
    side is a function of the arguments)."""
    properties = list(tool.parameters.get("properties", {}))
    names: list[str] = []
    for spec in (tool.effect.write_targets, tool.effect.read_targets):
        if spec is None:
            continue
        if callable(spec):
            return properties
        for template in [spec] if isinstance(spec, str) else spec:
            names.extend(template_fields(template))
    return list(dict.fromkeys(names))


def _pick(tool: str, name: str, table: Mapping[str, Any]) -> Any:
    if f"{tool}.{name}" in table:
        return table[f"{tool}.{name}"]
    return table.get(name)


def alias_table(tools: Mapping[str, Tool], examples: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Per ``"tool.argument"`` that feeds a target: the variants of its example values."""
    table: dict[str, list[Any]] = {}
    for name, tool in tools.items():
        for argument in target_arguments(tool):
            values = _pick(name, argument, examples) or ()
            variants = [v for value in values for v in alias_variants(value)]
            if variants:
                table[f"{name}.{argument}"] = list(dict.fromkeys(variants))
    return table


def _suggest(tool: Tool, argument: str, a: Any, b: Any) -> str:
    """A fold that makes the two spellings one name, if a built-in one does."""
    if isinstance(a, str) and isinstance(b, str):
        for step in FOLD_STEPS:
            fold = Fold((step,))
            if fold(a) == fold(b):
                return f"canonical={{'{argument}': '{step}'}} (or a fold that includes '{step}')"
        if Fold(("case", "whitespace", "nfkc", "path"))(a) == Fold(
            ("case", "whitespace", "nfkc", "path")
        )(b):
            return f"canonical={{'{argument}': 'case+whitespace+nfkc+path'}} (the steps it applies)"
        return f"canonical={{'{argument}': Fold(custom=...)}} (the store's own fold)"
    return (
        f"a typed '{argument}' argument (the certifier spells the value the tool receives: "
        "type it as the store keys it, e.g. int), or canonical= with a custom fold"
    )


def _overlap(x: Iterable[str], y: Iterable[str]) -> bool:
    ys = list(y)
    return any(overlaps(a, b) for a in x for b in ys)


def check_targets_canonical(kit: KitView, name: str) -> ClaimResult:
    """``targets_canonical`` for one writer: a call and a variant of it (one argument that
    feeds its targets spelled another way) that change the same resource of the store must
    declare overlapping write targets. The store's view: ``resources(state)`` (the two runs
    change a common resource) or, without it, the final fingerprints (both change the state,
    to the same state)."""
    tool = kit.toolset[name]
    feeding = target_arguments(tool)

    def body(data: st.DataObject) -> None:
        arguments = data.draw(kit.strategies[name], label="arguments")
        present = [a for a in feeding if a in arguments and alias_variants(arguments[a])]
        if not present:
            reject()
        argument = data.draw(st.sampled_from(present), label="aliased argument")
        variants = [
            v
            for v in alias_variants(arguments[argument])
            if tool.is_valid({**arguments, argument: v})
        ]
        if not variants:
            reject()
        variant = data.draw(st.sampled_from(variants), label="variant")
        other = {**arguments, argument: variant}
        first, second = tool.footprint(arguments), tool.footprint(other)
        if first.writes is None or second.writes is None or first.error or second.error:
            reject()  # unknown targets: the certifier keeps such calls apart anyway
        assert first.writes is not None
        assert second.writes is not None
        if _overlap(first.writes, second.writes):
            return  # declared as one resource (or overlapping ones): nothing can certify apart
        run_a, run_b = kit.once(name, arguments), kit.once(name, other)
        shared = _shared_resources(run_a, run_b)
        if shared is None:
            return
        raise Falsified(
            Counterexample(
                calls=((name, arguments), (name, other)),
                message=(
                    f"'{name}' with {argument}={arguments[argument]!r} and with "
                    f"{argument}={variant!r} change the same resource of the store "
                    f"({shared}), but declare disjoint write targets "
                    f"({sorted(first.writes)} vs {sorted(second.writes)}): the certifier "
                    "would run the two calls concurrently."
                ),
                expected=Outcome(
                    "one resource: overlapping targets",
                    (),
                    None,
                    (f"#1 {sorted(first.writes)}", f"#2 {sorted(second.writes)}"),
                ),
                actual=Outcome(
                    "what each call changed, each on a fresh state",
                    (run_a.results[0].content, run_b.results[0].content),
                    None,
                ),
                fix=(
                    f"The store folds '{argument}' but the targets of '{name}' spell it raw: "
                    f"declare {_suggest(tool, argument, arguments[argument], variant)} on "
                    f"'{name}' and on every tool that names the same resources."
                ),
            )
        )

    return kit._result(
        "targets_canonical",
        st.data(),
        body,
        tool=name,
        empty="no argument that feeds its targets has another spelling to try",
    )


def _shared_resources(run_a: Any, run_b: Any) -> str | None:
    """What the two single-call runs changed in common, as text (``None``: nothing)."""
    before_a, after_a = run_a.before, run_a.after
    before_b, after_b = run_b.before, run_b.after
    if before_a.resources is not None and before_b.resources is not None:
        changed_a = changed_resources(before_a.resources, after_a.resources)
        changed_b = changed_resources(before_b.resources, after_b.resources)
        common = sorted(changed_a & changed_b)
        return ", ".join(common[:3]) if common else None
    if before_a.fingerprint is None:
        return None
    changed = before_a.fingerprint != after_a.fingerprint
    if changed and after_a.fingerprint == after_b.fingerprint:
        return "both leave the same state"
    return None
