"""Claims about the proxy's effects file: TOML or JSON, applied to OpenAI-style specs, and
every mistake named by file, tool and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.proxy import load_effects, toolset_for

SPEC = {
    "type": "function",
    "function": {
        "name": "read_doc",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    },
}


def test_a_toml_effects_file_declares_each_tools_effect(tmp_path: Path) -> None:
    path = tmp_path / "effects.toml"
    path.write_text(
        '[tools.read_doc]\nread_only = true\nread_targets = "doc:{key}"\ncanonical = "case"\n'
        '[tools.set_status]\nidempotent = true\nwrite_targets = ["doc:{key}/status"]\n'
        "read_targets = []\n",
        encoding="utf-8",
    )
    effects = load_effects(path)
    assert effects["read_doc"].read_only
    assert effects["read_doc"].read_targets == "doc:{key}"
    assert effects["set_status"].idempotent
    assert not effects["set_status"].read_only
    assert effects["set_status"].write_targets == ("doc:{key}/status",)


def test_a_json_effects_file_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "effects.json"
    path.write_text(json.dumps({"tools": {"read_doc": {"read_only": True}}}), encoding="utf-8")
    assert load_effects(path)["read_doc"].read_only


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[tools.read_doc]\nread_only = 'yes'\n", "'read_only' must be true or false"),
        ("[tools.read_doc]\nreadonly = true\n", "unknown field(s) ['readonly']"),
        ("[tools.read_doc]\nwrite_targets = 3\n", "'write_targets' must be a template"),
        ("[tools.read_doc]\nread_only = true\nwrite_targets = 'doc:{key}'\n", "read-only"),
        ("[tool.read_doc]\n", "needs a 'tools' table"),
        ("[tools.read_doc\n", "not valid TOML"),
    ],
)
def test_every_mistake_names_the_file_the_tool_and_the_field(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "effects.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_effects(path)
    assert str(path) in str(error.value)
    assert fragment in str(error.value)


def test_a_missing_effects_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot read effects file"):
        load_effects(tmp_path / "nope.toml")


def test_the_file_is_the_only_source_of_effects_the_proxy_trusts(tmp_path: Path) -> None:
    unlisted = toolset_for([SPEC], {})
    assert not unlisted["read_doc"].effect.annotated  # the spec's own hint certifies nothing
    path = tmp_path / "effects.toml"
    path.write_text("[tools.read_doc]\nread_only = true\n", encoding="utf-8")
    assert toolset_for([SPEC], load_effects(path))["read_doc"].effect.read_only


def test_a_target_template_naming_no_argument_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "effects.toml"
    path.write_text(
        "[tools.read_doc]\nread_only = true\nread_targets = 'doc:{nme}'\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match="nme"):
        toolset_for([SPEC], load_effects(path))
