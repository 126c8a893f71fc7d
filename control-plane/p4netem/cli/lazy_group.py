"""The root group of `p4netem`, whose commands are imported and built when first needed.

Why: typer builds the click command of every registered command before it runs any (it reads each
function's signature and evaluates its annotations, four times over), and registering them meant
importing every command module and, through the entry points (a scan of every installed
distribution), the studies' command modules. `p4netem set delay=40ms` paid for all 18 commands.
Here the group knows each built-in command's name and module only: running a command imports that
module and builds the commands it registers, nothing else. Listing the commands (`p4netem --help`,
the suggestions after a mistyped one) builds all of them, the other packages' too, in the order
typer gives them (commands first, then groups; the built-in ones before the others').

What is built is typer's own work on the same registrations (a module's `register(app)`, or its
`app` as a group), so options, help texts and behaviour are those typer would give; a built-in
name is never looked up among the other packages' commands (they cannot replace one).
"""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup
from typer.main import get_group

from p4netem_entry import sigint_after_imports

Command = Any  # a click command of typer's (typer vendors click; its classes are private)


@contextmanager
def _sigint_after_imports() -> Iterator[None]:
    """p4netem_entry's hold on Ctrl-C during imports, for the command modules imported later
    (typer turns the KeyboardInterrupt raised after into exit 130, no traceback). Only from the
    main thread, and only where Ctrl-C has Python's default handler."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    with sigint_after_imports():
        yield


class LazyCommands(MutableMapping[str, Command]):
    """name -> click command, built on first read. `builtin`: name -> module (relative to
    `package`) whose `register(app)` registers it, or whose `app` is the group `name`; `groups`:
    the names of `builtin` that are groups. `others` registers the other packages' commands."""

    def __init__(self, package: str, builtin: Mapping[str, str], groups: frozenset[str],
                 others: Callable[[typer.Typer], None], new_typer: Callable[[], typer.Typer]) -> None:
        self._package = package
        self._builtin = dict(builtin)
        self._groups = groups
        self._others = others
        self._new_typer = new_typer
        self._built: dict[str, Command] = {}
        self._other_commands: dict[str, Command] | None = None
        self._added: dict[str, Command] = {}  # TyperGroup.add_command

    def _build_builtin(self, name: str) -> Command:
        module_name = self._builtin[name]
        with _sigint_after_imports():
            module = importlib.import_module(f".{module_name}", self._package)
        app = self._new_typer()
        if hasattr(module, "register"):
            module.register(app)
        else:  # a module that is one group (timeline, trace, profiles)
            app.add_typer(module.app, name=name)
        # Every command the module registers (apply: also set and reset), as typer builds them.
        built = get_group(app).commands
        for other, command in built.items():
            if self._builtin.get(other) == module_name:
                self._built.setdefault(other, command)
        return self._built[name]

    def _others_built(self) -> dict[str, Command]:
        if self._other_commands is None:
            app = self._new_typer()
            with _sigint_after_imports():
                self._others(app)
            self._other_commands = {name: command for name, command in get_group(app).commands.items()
                                    if name not in self._builtin}
        return self._other_commands

    def __getitem__(self, name: str) -> Command:
        if name in self._added:
            return self._added[name]
        if name in self._built:
            return self._built[name]
        if name in self._builtin:
            return self._build_builtin(name)
        return self._others_built()[name]

    def __iter__(self) -> Iterator[str]:
        others = self._others_built()
        other_groups = {n for n, c in others.items() if isinstance(c, TyperGroup)}
        names = [n for n in self._builtin if n not in self._groups]
        names += [n for n in others if n not in other_groups]
        names += [n for n in self._builtin if n in self._groups]
        names += [n for n in others if n in other_groups]
        names += [n for n in self._added if n not in names]
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return name in self._added or name in self._builtin or name in self._others_built()

    def __setitem__(self, name: str, command: Command) -> None:
        self._added[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("p4netem's commands cannot be removed")


class LazyGroup(TyperGroup):
    """A TyperGroup whose `commands` is a LazyCommands; set `lazy_commands` on a subclass (a
    function returning it, called once per group built)."""

    lazy_commands: Callable[[], LazyCommands]

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = type(self).lazy_commands()

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only (TyperGroup's reads every command's value)
