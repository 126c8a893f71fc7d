"""The docs and the `p4netem` command stay in step (no switch needed: the p4netem-switch binary is
only asked for its --help).

Users copy commands from README.md and docs/*.md. From the real command tree (typer's click
command, `typer.main.get_command(app)`, with the studies' commands joined through their entry
point) and every `p4netem ...` written in the docs (code blocks, indented or fenced; inline code,
headings included; the P4NETEM_PORTS/APPLY/OPTS settings of the systemd unit, which it passes to
`p4netem switch`):

1. every command and option of `p4netem` (hidden ones aside) is documented: the command is written
   somewhere as `p4netem PATH`, and each option is used in an invocation of its command or named in
   its command's section (a heading that names the command, or the page HOMES gives it);
2. every invocation names commands that exist and options its command takes, with allowed values
   where the code has a fixed set; `p4netem switch` passes options it does not know on to
   p4netem-switch, so those must be p4netem-switch's own (its --help) and not one it sets itself;
   an option named in a command's section (`--radio-ues`) is that command's, or listed in OTHERS;
3. every profile an example names (`apply NAME`, `switch --apply NAME`, `--profile NAME`) is a
   built-in, a file (a path, .yaml), a placeholder (PROFILE) or comes with --profiles FILE.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
import typer

from p4netem.cli import app
from p4netem.control.distributions import table_distribution
from p4netem.profiles import builtin_profiles

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# Commands documented on a page, or in a section whose heading does not name them:
# path -> [(doc, heading, or None for the whole page)]; a group's home is its commands' too.
HOMES: dict[tuple[str, ...], list[tuple[str, str | None]]] = {
    (): [("docs/cli.md", "The `p4netem` command line"), ("docs/security.md", "The clients")],
    ("web",): [("docs/web.md", None)],
    ("lab",): [("docs/labs.md", "CLI")],
    ("measure",): [("docs/labs.md", "CLI")],
    ("experiment",): [("docs/experiments.md", None)],
}
# Taken by every command that talks to a switch; documented once, in cli.md's first table.
SWITCH_OPTIONS = ("--switch", "--device-id", "--election-id")
# Options a command's section names that are another program's (or that the section says the
# command does not take); p4netem-switch's are checked against its --help.
OTHERS = {
    "--ue-ids": "p4netem-switch", "--metrics-addr": "p4netem-switch",
    "--DIR-queue": "mm-link", "--DIR-queue-args": "mm-link", "--uplink-queue": "mm-link", "--once": "mm-link",
    "-P": "iperf3",
    "--switch": "experiment's section: it takes no --switch",
}
# Text in inline code that starts like a command but is a message the program prints.
MESSAGES = ("p4netem lab reaper (",)

# TEMPORARY allowlist (lead: clear it once the helpers editing docs/labs.md, docs/experiments.md
# and studies/p4netem_studies/cli/ are done): problems there, which this helper was told not to
# edit; the fixes are in its report. An entry that no longer occurs fails
# test_allowlist_is_current, so the list only shrinks.
KNOWN_ELSEWHERE: set[str] = set()  # temporary allowances for docs another change is fixing: none now

HELP_OPTIONS = ("-h", "--help")
# `p4netem` where a command starts (also .venv/bin/p4netem), not p4netem.lab or /etc/default/p4netem.
_P4NETEM = re.compile(r"(?<![\w./@$-])(?:[\w./-]*bin/)?p4netem(?=\s|$)")
_P4NETEM_SWITCH = re.compile(r"(?<![\w./@$-])(?:[\w./-]*/)?p4netem-switch(?=\s|$)")
_UNIT_SETTING = re.compile(r"\bP4NETEM_(?:PORTS|APPLY|OPTS)=\"([^\"]*)\"")
_SHELL_OPS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1"}
# PROFILE, FILE.pcap, NAME|FILE, ...: words the docs put where the user writes their own.
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?:[.|/][A-Za-z0-9_.]*)*$|^\.\.\.$|^…$")
# Words that may come before a command: a prompt, sudo, VAR=value, timeout N.
_PREFIX = re.compile(r"^(?:(?:\$|sudo|env|nohup|time|exec|-E|timeout\s+\S+|[A-Z_][A-Z0-9_]*=\S*)\s+)*$")


# --------------------------------------------------------------------------------- the real command


@cache
def root():
    return typer.main.get_command(app)


def is_group(cmd) -> bool:
    return hasattr(cmd, "commands")


def commands(cmd, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every command and group, recursively, hidden ones left out."""
    if getattr(cmd, "hidden", False):
        return
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from commands(sub, path + (name,))


def options(cmd) -> list:
    return [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]


def option_names(param) -> list[str]:
    """The names the docs must show: the long ones (both of a --once/--watch pair), or the short
    one of an option that has no long one."""
    names = list(param.opts) + list(param.secondary_opts)
    return [n for n in names if n.startswith("--")] or names


def find_option(cmd, name: str):
    return next((p for p in options(cmd) if name in p.opts or name in p.secondary_opts), None)


def takes_value(param) -> bool:
    return not (param.is_flag or param.count)


def show(path: tuple[str, ...]) -> str:
    return " ".join(("p4netem",) + path)


def _one_of(allowed: Callable[[], object]) -> Callable[[str], None]:
    def check(value: str) -> None:
        names = list(allowed())
        if value not in names:
            raise ValueError(f"not one of {', '.join(names)}")
    return check


def _presets():
    from p4netem_studies.harness.plan import PRESETS
    return PRESETS


def _protocols():
    from p4netem_studies.harness.protocols import PROTOCOLS
    return PROTOCOLS


def _targets():
    from p4netem_studies.cli.run_options import TARGET_NAMES
    return TARGET_NAMES


# Values the code checks against a fixed set (no typer Choice): (command, parameter) -> the
# code's own check.
VALUE_CHECKS: dict[tuple[tuple[str, ...], str], Callable[[str], None]] = {
    (("distribution", "show"), "which"): lambda v: table_distribution(v, "--table"),
    (("measure",), "preset"): _one_of(_presets),
    (("measure",), "protocol"): _one_of(_protocols),
    (("measure",), "target"): _one_of(_targets),
    (("experiment", "run"), "target"): _one_of(_targets),
    (("lab", "up"), "target"): _one_of(_targets),
}


def check_value(path: tuple[str, ...], param, value: str) -> str | None:
    if _PLACEHOLDER.match(value) or "|" in value:
        return None
    desc = getattr(param, "type_descriptor", None)
    if desc is not None and desc.is_choice:
        allowed = [str(getattr(c, "value", c)) for c in desc.choices or ()]
        if value not in allowed:
            return f"{param.opts[0]} {value!r} is not one of {', '.join(allowed)}"
    check = VALUE_CHECKS.get((path, param.name))
    if check is not None:
        try:
            check(value)
        except Exception as exc:  # the code's own message names what is allowed
            return f"{param.opts[0]} {value!r}: {exc}"
    return None


# ------------------------------------------------------------------------------ p4netem-switch's own


@dataclass(frozen=True)
class SwitchOption:
    names: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...] | None


def parse_switch_help(text: str) -> dict[str, SwitchOption]:
    """clap's --help: `  -i, --interface <N@IFACE>` lines; `[possible values: a, b]`, and metavars
    of plain words (`--io <auto|af_xdp|af_packet>`), are choices."""
    found: dict[str, SwitchOption] = {}
    for block in re.split(r"\n(?= {2,8}-)", text):
        m = re.match(r"\s*((?:-\w, )?--[\w-]+)(?: <([^>]+)>)?", block)
        if not m:
            continue
        names = tuple(n.strip() for n in m.group(1).split(","))
        metavar = m.group(2)
        choices = None
        if pv := re.search(r"\[possible values: ([^\]]+)\]", block):
            choices = tuple(v.strip() for v in pv.group(1).split(","))
        elif metavar and re.fullmatch(r"[a-z_]+(\|[a-z_]+)+", metavar):
            choices = tuple(metavar.split("|"))
        for n in names:
            found[n] = SwitchOption(names, metavar is not None, choices)
    return found


@pytest.fixture(scope="module")
def switch_options(switch_bin: str) -> dict[str, SwitchOption]:
    out = subprocess.run([switch_bin, "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    found = parse_switch_help(out)
    # The parser still reads clap's layout: a flag, an option with a value, a choice.
    assert not found["--grpc-insecure"].takes_value and found["--rt-priority"].takes_value, out
    assert found["--io"].choices and "af_packet" in found["--io"].choices, out
    return found


# `p4netem switch` gives p4netem-switch these itself: passed on as well, they would reach it twice.
SET_BY_P4NETEM_SWITCH = {"--grpc-addr": "--switch HOST:PORT"}


# ------------------------------------------------------------------------------------------ the docs


@dataclass(frozen=True)
class Invocation:
    where: str          # docs/cli.md:123
    text: str           # what follows the program's name
    in_heading: bool
    program: str = "p4netem"

    def __str__(self) -> str:
        return f"{self.where}: `{self.program} {self.text}`"


@dataclass
class Section:
    doc: str
    level: int
    title: str
    lines: list[str] = field(default_factory=list)        # with its subsections
    intro_lines: list[str] = field(default_factory=list)  # up to its first subsection
    invocations: list[Invocation] = field(default_factory=list)  # its heading's

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def intro(self) -> str:
        return "\n".join(self.intro_lines)


@dataclass
class Doc:
    name: str
    text: str = ""
    sections: list[Section] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    # inline code in prose, with the section it is in and the sections above that
    spans: list[tuple[tuple[Section, ...], str]] = field(default_factory=list)


def _inline_spans(text: str) -> list[str]:
    return re.findall(r"(?<!`)`([^`]+)`(?!`)", text)


def strip_comment(line: str) -> str:
    """A shell line without its comment (a `#` that starts a word, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


SHELL_BLOCKS = {"", "sh", "bash", "shell", "console", "text"}


def _command_lines(lines: list[tuple[int, str]], language: str = "") -> list[tuple[int, str]]:
    """The commands of a code block: its `$ ` lines when it has any (the rest is output), else every
    line of a shell block (a python or yaml block has none). A line ending in a backslash goes on
    with the next, and so does a synopsis (a line of options after a command)."""
    prompted = any(line.lstrip().startswith("$ ") for _, line in lines)
    if not prompted and language not in SHELL_BLOCKS:
        return []
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in lines:
        stripped = strip_comment(line).strip()
        if not prompted and out and pending is None and stripped.startswith(("[-", "-")):
            out[-1] = (out[-1][0], out[-1][1] + " " + stripped)
            continue
        if pending is not None:
            pending = (pending[0], pending[1][:-1] + " " + stripped)
        elif prompted:
            if not stripped.startswith("$ "):
                continue
            pending = (number, stripped[2:])
        else:
            pending = (number, stripped)
        if not pending[1].endswith("\\"):
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def _command_position(before: str) -> bool:
    segment = re.split(r"&&|\|\||[;|(]|\$\(", before)[-1]
    return _PREFIX.match(segment.lstrip()) is not None


def invocations_in(text: str, where: str, in_heading: bool = False) -> list[Invocation]:
    """`p4netem ...`, `p4netem-switch --...` where a command starts (not `make -C p4netem`), and
    the unit's P4NETEM_APPLY="..." (what it passes to `p4netem switch`)."""
    text = strip_comment(text)
    found = []
    for m in _P4NETEM.finditer(text):
        rest = text[m.end():].strip()
        if _command_position(text[:m.start()]) and not (m.group(0) + " " + rest).startswith(MESSAGES):
            found.append(Invocation(where, rest, in_heading))
    for m in _P4NETEM_SWITCH.finditer(text):
        rest = text[m.end():].strip()
        if rest.startswith("-") and _command_position(text[:m.start()]):  # not its log or messages
            found.append(Invocation(where, rest, in_heading, "p4netem-switch"))
    for m in _UNIT_SETTING.finditer(text):
        found.append(Invocation(where, "switch " + m.group(1), in_heading))
    return found


@cache
def read_doc(path: Path) -> Doc:
    name = str(path.relative_to(REPO))
    doc = Doc(name, path.read_text())
    stack = [Section(name, 0, "")]
    doc.sections.append(stack[0])
    fence: str | None = None
    language = ""
    block: list[tuple[int, str]] = []
    indented: list[tuple[int, str]] = []
    paragraph: list[tuple[int, str]] = []
    previous_blank = True

    def flush_paragraph() -> None:
        if paragraph:
            text = " ".join(line.strip() for _, line in paragraph)  # a span may cross a line break
            for span in _inline_spans(text):
                doc.spans.append((tuple(stack), span))
                doc.invocations += invocations_in(span, f"{name}:{paragraph[0][0]}")
            paragraph.clear()

    def flush_block(lines: list[tuple[int, str]], language: str = "") -> None:
        for number, command in _command_lines(lines, language):
            doc.invocations += invocations_in(command, f"{name}:{number}")
        lines.clear()

    for number, line in enumerate(doc.text.splitlines(), 1):
        heading = re.match(r"(#{1,6})\s+(.*)", line) if fence is None else None
        if heading:
            flush_paragraph()
            flush_block(indented)
            level, title = len(heading.group(1)), heading.group(2).strip()
            while stack[-1].level >= level:
                stack.pop()
            section = Section(name, level, title)
            stack.append(section)
            doc.sections.append(section)
            for span in _inline_spans(title):
                section.invocations += invocations_in(span, f"{name}:{number}", in_heading=True)
            doc.invocations += section.invocations
        for s in stack:
            s.lines.append(line)
        stack[-1].intro_lines.append(line)
        if heading:
            previous_blank = False
            continue
        fence_mark = re.match(r"\s*(```|~~~)", line)
        if fence is not None:
            if fence_mark and fence_mark.group(1) == fence:
                fence = None
                flush_block(block, language)
            else:
                block.append((number, line))
            continue
        if fence_mark:
            flush_paragraph()
            flush_block(indented)
            fence = fence_mark.group(1)
            language = line.strip()[3:].strip().lower()
            previous_blank = False
            continue
        if line.startswith(("    ", "\t")) and (previous_blank or indented):
            flush_paragraph()
            indented.append((number, line))
            continue
        if indented and not line.strip():
            continue  # a blank line inside an indented block
        flush_block(indented)
        if not line.strip():
            flush_paragraph()
        elif line.lstrip().startswith("|"):  # a table row: a paragraph of its own
            flush_paragraph()
            paragraph.append((number, line))
            flush_paragraph()
        else:
            paragraph.append((number, line))
        previous_blank = not line.strip()
    flush_paragraph()
    flush_block(indented)
    flush_block(block, language)
    return doc


def docs() -> list[Doc]:
    return [read_doc(p) for p in DOC_FILES]


# -------------------------------------------------------------------------- an invocation, resolved


@dataclass
class Use:
    """A command an invocation reaches (`p4netem trace check|run` reaches two)."""
    invocation: Invocation
    path: tuple[str, ...]
    options: list[tuple[str, str, str | None]] = field(default_factory=list)  # (parameter, as written, value)
    positionals: list[str] = field(default_factory=list)


@dataclass
class Resolved:
    uses: list[Use] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def tokens_of(text: str) -> list[str]:
    """Shell words up to the end of the command (a pipe, `&&`, a redirection), without the
    synopsis' brackets (`[--seconds S]`); a `|` inside brackets separates alternatives
    (`[--mbps N | --topspeed]`)."""
    try:
        raw = shlex.split(text)
    except ValueError:  # a quote that a synopsis left open
        raw = text.split()
    out: list[str] = []
    depth = 0
    for token in raw:
        if depth == 0 and (token in _SHELL_OPS or re.match(r"^\d*[<>]", token)):
            break
        depth += token.count("[") - token.count("]")
        token = token.lstrip("[").rstrip("]")
        if token and token not in ("|", "...", "…"):
            out.append(token)
    return out


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not re.match(r"^-\d", token)


def resolve(inv: Invocation, switch_options: dict[str, SwitchOption] | None, tree=None) -> Resolved:
    """The commands an invocation reaches and what is wrong with it. Without switch_options,
    what `p4netem switch` passes on to p4netem-switch is not checked."""
    tree = tree if tree is not None else root()
    tokens = tokens_of(inv.text)
    res = Resolved()

    def problem(text: str) -> None:
        res.problems.append(f"{inv}: {text}")

    def value_after(i: int, eq: str, value: str) -> tuple[str | None, int]:
        if eq:
            return value, i
        return (tokens[i + 1], i + 1) if i + 1 < len(tokens) else (None, i)

    def switch_option(i: int, name: str, eq: str, value: str, passed_on: bool = True) -> int:
        own = switch_options.get(name) if switch_options is not None else None
        if switch_options is None:
            return i
        if own is None:
            problem(f"{name} is an option of neither `p4netem switch` nor p4netem-switch (its --help)")
            return i
        if passed_on and name in SET_BY_P4NETEM_SWITCH:
            problem(f"{name}: `p4netem switch` gives p4netem-switch its own; use {SET_BY_P4NETEM_SWITCH[name]}")
        if own.takes_value:
            value, i = value_after(i, eq, value)
            if own.choices and value and not _PLACEHOLDER.match(value) and "|" not in value \
                    and value not in own.choices:
                problem(f"p4netem-switch {name} {value!r} is not one of {', '.join(own.choices)}")
        return i

    def walk(cmd, path: tuple[str, ...], i: int, use: Use) -> None:
        while i < len(tokens):
            token = tokens[i]
            if _is_option(token):
                name, eq, value = token.partition("=")
                param = find_option(cmd, name)
                if name in HELP_OPTIONS:
                    pass
                elif param is not None:
                    if takes_value(param):
                        value, i = value_after(i, eq, value)
                        if value is not None and (bad := check_value(path, param, value)):
                            problem(f"{show(path)}: {bad}")
                        if path == ("switch",) and param.name == "profiles" and value and value.isdigit():
                            problem("--profiles N, p4netem-switch's number of profile ids, is not passed on: "
                                    "`p4netem switch --profiles` is apply's profile library (FILE)")
                    elif eq:
                        problem(f"{show(path)}: {name} is a flag and takes no value")
                    use.options.append((param.name, name, value if takes_value(param) else None))
                elif path == ("switch",):  # passed on to p4netem-switch
                    i = switch_option(i, name, eq, value)
                    use.options.append(("(p4netem-switch)", name, None))
                else:
                    problem(f"{show(path)} has no option {name}")
                i += 1
                continue
            if is_group(cmd):
                if _PLACEHOLDER.match(token):
                    problem(f"{token!r} where a command of {show(path)} goes")
                    return
                for alternative in token.split("|"):  # `trace check|run|load`
                    sub = cmd.commands.get(alternative)
                    if sub is None or getattr(sub, "hidden", False):
                        problem(f"{show(path)} has no command {alternative!r} (its commands: "
                                f"{', '.join(cmd.commands)})")
                    else:
                        walk(sub, path + (alternative,), i + 1, Use(inv, path + (alternative,), list(use.options)))
                return
            use.positionals.append(token)
            i += 1
        res.uses.append(use)

    if inv.program == "p4netem-switch":
        i = 0
        while i < len(tokens) and _is_option(tokens[i]):
            name, eq, value = tokens[i].partition("=")
            if name not in ("-h", "--help", "-V", "--version"):
                i = switch_option(i, name, eq, value, passed_on=False)
            i += 1
    elif tokens:
        walk(tree, (), 0, Use(inv, ()))
    return res


@cache
def _resolved_plain() -> tuple[Resolved, ...]:
    return tuple(resolve(inv, None) for doc in docs() for inv in doc.invocations)


def uses() -> list[Use]:
    return [use for r in _resolved_plain() for use in r.uses]


@cache
def section_paths(doc_name: str, index: int) -> frozenset[tuple[str, ...]]:
    """The commands a section's heading names (`## p4netem trace check|run|load`: three)."""
    section = read_doc(REPO / doc_name).sections[index]
    return frozenset(use.path for inv in section.invocations for use in resolve(inv, None).uses)


def home_text(path: tuple[str, ...]) -> str:
    """The sections about `p4netem PATH`: those whose heading names it, and its HOMES (a group's
    too; the root's only for the root)."""
    parts = [section.text for doc in docs() for i, section in enumerate(doc.sections)
             if path in section_paths(doc.name, i)]
    for n in range(1 if path else 0, len(path) + 1):
        for doc_name, heading in HOMES.get(path[:n], []):
            doc = read_doc(REPO / doc_name)
            if heading is None:
                parts.append(doc.text)
            else:
                parts += [s.intro if s.level == 1 else s.text for s in doc.sections if s.title == heading]
    return "\n".join(parts)


def named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def undocumented_options(tree) -> list[str]:
    """`p4netem PATH --option` for each option neither used in an invocation of its command nor
    named in its command's section. A long name whose short form is (`-i 1@eth1`) needs only to be
    named once in the docs (cli.md's short forms: "`-i` for `--interface`"), and a short form needs
    to be in that list or near its command."""
    used: dict[tuple[str, ...], set[str]] = {}
    for use in uses():
        used.setdefault(use.path, set()).update(written for _, written, _ in use.options)
    everywhere = "\n".join(doc.text for doc in docs())
    short_forms = read_doc(REPO / "docs/cli.md").sections[1].intro  # "Short forms used throughout: ..."
    missing = []
    for path, cmd in commands(tree):
        home = home_text(path)

        def near(name: str) -> bool:
            return name in used.get(path, set()) or named(name, home)

        for param in options(cmd):
            names = option_names(param)
            if all(n in SWITCH_OPTIONS for n in names):
                continue
            shorts = [o for o in param.opts + param.secondary_opts if not o.startswith("--")]
            for n in names:
                if not (near(n) or (any(near(s) for s in shorts) and named(n, everywhere))):
                    missing.append(f"{show(path)} {n}")
            for short in shorts:
                if not (near(short) or named(short, short_forms)):
                    missing.append(f"{show(path)} {short} (short form: cli.md's list, or its command's section)")
    return missing


def undocumented_commands(tree) -> list[str]:
    reached = {use.path for use in uses()}
    reached |= {path[:n] for path in reached for n in range(len(path))}
    return [show(path) for path, _ in commands(tree) if path not in reached]


def invocation_problems(switch_options: dict[str, SwitchOption]) -> list[str]:
    return [p for doc in docs() for inv in doc.invocations for p in resolve(inv, switch_options).problems]


def section_option_problems(switch_options: dict[str, SwitchOption]) -> list[str]:
    """Options that a command's section names in its prose (`--radio-ues`) and that are not the
    command's: a renamed or removed option the prose still tells users to give."""
    problems = []
    by_path = dict(commands(root()))
    for doc in docs():
        index = {id(s): i for i, s in enumerate(doc.sections)}
        for chain, span in doc.spans:
            if not span.startswith("-"):
                continue
            section = chain[-1]
            # The commands of this section's heading and of the headings above it.
            owners = set().union(*(section_paths(doc.name, index[id(s)]) for s in chain))
            if not owners:
                continue
            for token in tokens_of(span):
                name = token.partition("=")[0]
                if not re.fullmatch(r"--?[A-Za-z][\w-]*", name) or name in HELP_OPTIONS:
                    continue
                if any(find_option(by_path[p], name) for p in owners if p in by_path):
                    continue
                if ("switch",) in owners and name in switch_options:
                    continue
                other = OTHERS.get(name)
                if other == "p4netem-switch" and name not in switch_options:
                    problems.append(f"{doc.name}, {section.title!r}: `{span}`: {name} is no option of p4netem-switch")
                elif other is None:
                    problems.append(f"{doc.name}, {section.title!r}: `{span}`: {name} is no option of "
                                    f"{', '.join(sorted(show(p) for p in owners))}")
    return problems


# Which options name a profile: (command, parameter); "positional": the command's first argument.
PROFILE_OPTIONS = {
    (("apply",), "positional"), (("switch",), "apply"), (("trace", "run"), "profile"),
    (("trace", "load"), "profile"), (("replay",), "profile"), (("measure",), "profile"),
    (("lab", "up"), "profile"), (("lab", "up"), "link_profile"),
}


def unknown_profiles(found: list[Use] | None = None) -> list[str]:
    builtins = set(builtin_profiles())
    problems = []
    for use in uses() if found is None else found:
        given = [(param, value) for param, _, value in use.options]
        if use.positionals:
            given.append(("positional", use.positionals[0]))
        with_library = any(param == "profiles" for param, _ in given)
        for param, value in given:
            if (use.path, param) not in PROFILE_OPTIONS or value is None:
                continue
            name = value
            if use.path in (("measure",), ("lab", "up")):  # NAME+radio, NAME+prewoken
                name = name.removesuffix("+radio").removesuffix("+prewoken")
            if (name in builtins or "/" in name or name.endswith((".yaml", ".yml")) or with_library
                    or _PLACEHOLDER.match(name) or "|" in name):
                continue
            problems.append(f"{use.invocation}: profile {name!r} is not built in (p4netem profiles list), "
                            "not a file and not from --profiles FILE")
    return problems


def _not_allowlisted(problems: list[str]) -> list[str]:
    return [p for p in problems if p not in KNOWN_ELSEWHERE]


# ----------------------------------------------------------------------------------------- the tests


def test_the_docs_commands_are_found():
    """The reader sees the docs' commands: a change in how they are written that hid them would
    otherwise pass every check below."""
    found = [inv for doc in docs() for inv in doc.invocations]
    assert len(found) > 200
    written = {use.path[:1] for use in uses()}
    assert {("switch",), ("apply",), ("set",), ("stats",), ("lab",), ("measure",), ("experiment",)} <= written
    assert any(inv.program == "p4netem-switch" for inv in found)
    assert any(inv.text.startswith("switch --apply") for inv in found)  # the unit's P4NETEM_APPLY


def test_every_command_is_documented():
    missing = _not_allowlisted(undocumented_commands(root()))
    assert not missing, "commands written nowhere in README.md or docs/*.md as `p4netem ...`:\n" + "\n".join(missing)


def test_every_option_is_documented():
    preamble = read_doc(REPO / "docs/cli.md").sections[1].intro
    assert all(named(o, preamble) for o in SWITCH_OPTIONS), "cli.md's first table names the switch options"
    missing = _not_allowlisted(undocumented_options(root()))
    assert not missing, ("options neither used in an invocation of their command nor named in its section "
                         "of README.md/docs/*.md:\n" + "\n".join(missing))


def test_a_new_option_without_docs_is_caught():
    """What a future change that adds an option and no docs meets."""
    extra = typer.Typer(add_completion=False)

    @extra.command("apply")
    def apply(profile: str, brand_new: bool = typer.Option(False, "--brand-new-option")) -> None:
        """A stand-in."""

    @extra.command("not-a-command")
    def other() -> None:
        """A stand-in."""

    tree = typer.main.get_command(extra)
    assert undocumented_options(tree) == ["p4netem apply --brand-new-option"]
    assert undocumented_commands(tree) == ["p4netem not-a-command"]


def test_every_invocation_in_the_docs_exists(switch_options):
    problems = _not_allowlisted(invocation_problems(switch_options))
    assert not problems, "invocations in README.md/docs/*.md that the command refuses:\n" + "\n".join(problems)


def test_the_resolver_catches_a_bad_invocation_or_profile(switch_options):
    def problems(text: str) -> list[str]:
        return resolve(Invocation("x.md:1", text, False), switch_options).problems

    def profiles(text: str) -> list[str]:
        return unknown_profiles(resolve(Invocation("x.md:1", text, False), None).uses)

    assert problems("apply lte --rule client=10.0.0.1 --json") == []
    assert problems("switch -i 1@a -i 2@b --rt-priority 0 --io af_xdp --fix-offloads --apply lte") == []
    assert "has no option --nope" in problems("apply lte --nope")[0]
    assert "has no command 'aply'" in problems("aply lte")[0]
    assert "neither `p4netem switch` nor p4netem-switch" in problems("switch -i 1@a --rt-prio 0")[0]
    assert "not one of auto, af_xdp, af_packet" in problems("switch --io xdp")[0]
    assert "use --switch HOST:PORT" in problems("switch --grpc-addr 0.0.0.0:9559")[0]
    assert "not a distribution table" in problems("distribution show --table gauss")[0]
    assert "is not passed on" in problems("switch -i 1@a --profiles 8192")[0]
    assert profiles("apply lte-200ms") == profiles("apply my.yaml") == profiles("apply PROFILE") == []
    assert profiles("apply weak-cell --profiles handover.yaml") == profiles("measure --profile hspa+radio") == []
    assert "profile 'lte-300ms' is not built in" in profiles("apply lte-300ms")[0]
    assert "profile 'umts' is not built in" in profiles("switch -i 1@a --apply umts")[0]
    assert "profile 'lte2' is not built in" in profiles("lab up inline --profile lte2+radio")[0]
    assert "has no option --bogus" in problems("--grpc-ca ca.pem show --bogus")[0]


def test_options_named_in_a_commands_section_are_its_own(switch_options):
    problems = _not_allowlisted(section_option_problems(switch_options))
    assert not problems, "\n".join(problems)


def test_every_profile_in_the_examples_exists():
    problems = _not_allowlisted(unknown_profiles())
    assert not problems, "\n".join(problems)


def test_allowlist_is_current(switch_options):
    found = set(undocumented_commands(root()) + undocumented_options(root()) + invocation_problems(switch_options)
                + section_option_problems(switch_options) + unknown_profiles())
    stale = sorted(KNOWN_ELSEWHERE - found)
    assert not stale, "fixed, so take them off KNOWN_ELSEWHERE:\n" + "\n".join(stale)
