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


# What typer and rich import only once a help text is formatted (typer's rich_utils: rich.markdown
# with markdown_it, rich.syntax with pygments, rich.traceback, ...; then, while printing, click's
# text wrapper and rich's emoji codes), found with `python -X importtime p4netem --help`: about 120
# modules, a good part of the help's time. Imported from the click code that shows the help, not
# from ours, they were outside the hold on Ctrl-C: one landing in an import's module-lock callback
# was dropped ("Exception ignored in: <function _get_module_lock.<locals>.cb>") and the help went
# on to exit 0. Imported under the hold when a help is about to be shown, and only then.
HELP_MODULES = ("typer.rich_utils", "typer._click._textwrap", "rich._emoji_codes")


def _import_help_modules() -> None:
    """HELP_MODULES (under a hold the caller has). Names private to typer and rich: another
    version without one imports it itself, unheld, as before."""
    for name in HELP_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    try:  # rich's cell widths: a table of the Unicode version, imported on first use
        from rich._unicode_data import load
    except ImportError:
        return
    load()


def _asks_for_help(ctx: Any, args: list[str]) -> bool:
    """Whether `args` (a command's, or the root's with its subcommand's after) hold a help option
    before any `--`. A value that is spelled like one (`--name -h`) only imports the help early."""
    names = set(ctx.help_option_names)
    words = args[:args.index("--")] if "--" in args else args
    return any(word in names for word in words)


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
        # The build too: typer imports what it needs for the commands' parameters then (its
        # pydantic adapters, pydantic: some 90 modules).
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
                built = get_group(app).commands
            self._other_commands = {name: command for name, command in built.items()
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

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # Under the hold: the root's own options, whose values typer converts with what it imports
        # then (its pydantic adapters, pydantic; click's --help option), and for `p4netem`,
        # `p4netem --help`, `p4netem CMD ... --help` the help's imports (HELP_MODULES). A Ctrl-C
        # held meanwhile is raised at the end, inside typer's handling of it: exit 130. The root's
        # help is printed within (and ends the command): a Ctrl-C while it prints leaves it whole,
        # then exit 130. A command's own help is printed after, Ctrl-C not held.
        with _sigint_after_imports():
            if not ctx.resilient_parsing and ((not args and self.no_args_is_help) or _asks_for_help(ctx, args)):
                _import_help_modules()
            return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        # A group given no command (`p4netem timeline`) shows its help.
        if not ctx.resilient_parsing and isinstance(command, TyperGroup) and not rest:
            with _sigint_after_imports():
                _import_help_modules()
        return name, command, rest
