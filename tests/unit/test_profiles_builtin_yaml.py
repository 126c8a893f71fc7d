"""The built-in profiles are parsed by libyaml (profiles/yaml_files.py, _BuiltinLoader): every
command that names a profile read all 14 files with PyYAML's pure-Python parser, about five times
slower. The documents must be exactly those the pure-Python loader (users' files) makes."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from p4netem import safe_yaml
from p4netem.profiles import library, yaml_files


def builtin_files() -> list:
    folder = resources.files("p4netem.profiles").joinpath("builtin")
    return sorted((e for e in folder.iterdir() if e.name.endswith(".yaml")), key=lambda e: e.name)


def test_libyaml_reads_each_builtin_file_as_the_pure_python_loader_does() -> None:
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the built-ins fall back to the pure-Python loader"
    assert len(builtin_files()) == len(library.BUILTIN_NAMES)
    for entry in builtin_files():
        text = entry.read_text(encoding="utf-8")
        assert safe_yaml.load(text, entry.name, yaml_files._BuiltinLoader) == \
            safe_yaml.load(text, entry.name, yaml_files._StrictLoader), entry.name


def test_builtin_profiles_do_not_use_the_pure_python_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self, *args, **kwargs):
        raise AssertionError("the pure-Python YAML scanner read a built-in profile")

    monkeypatch.setattr(yaml.scanner.Scanner, "fetch_more_tokens", refused)
    library._load.cache_clear()
    try:
        assert list(library.builtin_profiles()) == list(library.BUILTIN_NAMES)
    finally:
        library._load.cache_clear()


def test_the_builtin_loader_still_finds_duplicate_keys() -> None:
    with pytest.raises(Exception) as info:
        yaml_files.loads_builtin_profiles("name: a\nname: b\n", "builtin/x.yaml")
    assert "duplicate key 'name'" in str(info.value) and "line 2" in str(info.value)
