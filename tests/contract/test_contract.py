"""The pipeline contract: the P4 program, its checked-in P4Info and the running target must agree.

Three views of one control-plane API are reduced to the same model (p4info_model) and diffed:
  - the P4 source, read the way p4c's P4Runtime serializer would (p4source),
  - p4src/p4netem.p4info.txtpb,
  - the P4Info a freshly started p4netem-switch reports over P4Runtime.
The tables of docs/pipeline-contract.md, which people implement from, are checked against the
source as well (contract_doc).
The mutation tests prove the comparison sees what it claims to: each one changes a single width,
id, key, scope, size... in an in-memory copy and asserts the diff names that object.
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contract_doc  # noqa: E402
import p4info_model as pm  # noqa: E402
import p4runtime_types as pt  # noqa: E402
import p4source  # noqa: E402
import target  # noqa: E402
from p4lex import P4SourceError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
P4_MAIN = ROOT / "p4src" / "p4netem.p4"
P4_INCLUDE = ROOT / "p4src" / "include"
P4INFO_FILE = ROOT / "p4src" / "p4netem.p4info.txtpb"
CONTRACT_DOC = ROOT / "docs" / "pipeline-contract.md"


def parse_p4info(text: str):
    return text_format.Parse(text, pt.P4Info())


@pytest.fixture(scope="module")
def p4info_message():
    return parse_p4info(P4INFO_FILE.read_text())


@pytest.fixture(scope="module")
def file_model(p4info_message):
    return pm.from_p4info(p4info_message)


@pytest.fixture(scope="module")
def source_model():
    return p4source.load(P4_MAIN).model()


def source_model_with(*edits: tuple[str, str, str]):
    """The source model after edits (file, old, new); each `old` must occur exactly once in its file."""
    texts: dict[Path, str] = {}
    for file, old, new in edits:
        path = P4_INCLUDE / file if file != "p4netem.p4" else P4_MAIN
        text = texts.get(path, path.read_text())
        assert text.count(old) == 1, f"mutation target {old!r} must occur exactly once in {file}"
        texts[path] = text.replace(old, new)
    return p4source.load(P4_MAIN, overrides={str(k): v for k, v in texts.items()}).model()


# ---------------------------------------------------------------------------------------------
# source <-> checked-in P4Info
# ---------------------------------------------------------------------------------------------


def test_compile_time_sizes_change_only_sizes(source_model):
    """p4c -DUE_COUNT=... -DMAX_PROFILES=... -DCLASSIFIER_SIZE=... (a small program for bmv2, issue 13
    defect 7): every array indexed by UEs or pds, and the tables, take the chosen sizes; nothing
    else of the P4Info changes. (Without defines the source equals the checked-in P4Info: the
    defaults are the contract's sizes, test_source_matches_p4info_file.)"""
    small = p4source.load(P4_MAIN, defines={"UE_COUNT": "4096", "MAX_PROFILES": "64",
                                            "CLASSIFIER_SIZE": "1024"}).model()
    changes = pm.diff(source_model, small, "default", "small")
    sizes = {
        "registers['P4netemIngress.radio_state']['size']": 4096,
        "registers['P4netemIngress.radio_state_time_ns']['size']": 4096 * 16,
        "registers['P4netemIngress.radio_fach_free_ns']['size']": 4096 * 2,
        "counters['P4netemIngress.radio_promotions']['size']": 4096 * 4,
        "registers['P4netemIngress.next_free_ns']['size']": 128,
        "counters['P4netemIngress.profile_in']['size']": 128,
        "counters['P4netemIngress.drops']['size']": 128 * 16,
        "tables['P4netemIngress.profile']['size']": 128,
        "tables['P4netemIngress.radio_profile']['size']": 64,
        "tables['P4netemIngress.classifier']['size']": 1024,
    }
    for path, size in sizes.items():
        assert any(c.startswith(path) and c.rstrip().endswith(str(size)) for c in changes), (path, changes[:20])
    assert all("['size']" in c for c in changes), [c for c in changes if "['size']" not in c]

def test_p4info_file_parses_as_p4info(p4info_message):
    assert p4info_message.pkg_info.arch == "v1model"
    assert p4info_message.tables and p4info_message.actions


def test_source_matches_p4info_file(source_model, file_model):
    problems = pm.diff(source_model, file_model, "P4 source", "p4info file")
    assert not problems, "P4 source and p4src/p4netem.p4info.txtpb disagree:\n" + "\n".join(problems)


def test_source_model_covers_every_kind(source_model):
    # Guards against a vacuous match: both sides empty for some kind would also "agree".
    for kind in ("tables", "actions", "counters", "registers", "digests", "controller_headers"):
        assert source_model[kind], f"no {kind} read from the P4 source"
    assert all(t["keys"] for t in source_model["tables"].values())


def test_p4c_hash_ids():
    # p4c gives NoAction (core.p4) id 21257015 in every published P4Info; the same hash names
    # v1model digests, which p4c does not let @id set.
    assert (0x01 << 24) | (p4source.jenkins_one_at_a_time("NoAction") & 0xFFFFFF) == 21257015


def test_ids_are_unique_and_prefixed(file_model):
    prefixes = {"tables": 0x02, "actions": 0x01, "counters": 0x12, "registers": 0x16, "digests": 0x17,
                "controller_headers": 0x04}
    seen = {}
    for kind, prefix in prefixes.items():
        for name, obj in file_model[kind].items():
            assert obj["id"] >> 24 == prefix, f"{kind} {name} id {obj['id']:#x} lacks prefix {prefix:#x}"
            assert obj["id"] not in seen, f"id {obj['id']:#x} used by {seen.get(obj['id'])} and {name}"
            seen[obj["id"]] = name


def test_contract_doc_matches_source(source_model):
    stated = contract_doc.model(CONTRACT_DOC.read_text())
    problems = pm.diff(contract_doc.project(source_model), stated, "P4 source", "pipeline-contract.md")
    assert not problems, "docs/pipeline-contract.md and the P4 source disagree:\n" + "\n".join(problems)


DOC_MUTATIONS = {
    "key width": ("3: meta.ipv4_src ternary 32;", "3: meta.ipv4_src ternary 16;",
                  "tables['P4netemIngress.classifier']['keys']"),
    "table id": ("| 0x02000005 | P4netemIngress.profile |", "| 0x02000006 | P4netemIngress.profile |",
                 "tables['P4netemIngress.profile']['id']"),
    "scope": ("set_impairment, @defaultonly NoAction", "set_impairment, NoAction",
              "tables['P4netemIngress.profile']['actions']"),
    "impairment param width": ("| 12 | overhead_bytes | 16 |", "| 12 | overhead_bytes | 32 |",
                               "actions['P4netemIngress.set_impairment']['params'][11]"),
    "register size": ("| P4netemIngress.ge_state | 8 | 8192 |", "| P4netemIngress.ge_state | 8 | 4096 |",
                      "registers['P4netemIngress.ge_state']['size']"),
    "digest id": ("| 0x17F8D97F | mac_learn_digest_t |", "| 0x17000001 | mac_learn_digest_t |",
                  "digests['mac_learn_digest_t']['id']"),
}


@pytest.mark.parametrize("mutation", sorted(DOC_MUTATIONS))
def test_doc_diff_catches_change(mutation, source_model):
    old, new, where = DOC_MUTATIONS[mutation]
    text = CONTRACT_DOC.read_text()
    assert text.count(old) == 1, f"mutation target {old!r} must occur exactly once"
    problems = pm.diff(contract_doc.project(source_model), contract_doc.model(text.replace(old, new)),
                       "P4 source", "mutated doc")
    assert any(p.startswith(where) for p in problems), f"{mutation}: expected a difference at {where}, got {problems}"


# ---------------------------------------------------------------------------------------------
# the running target
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def target_model():
    if not target.SWITCH_BIN.exists():
        pytest.fail(f"{target.SWITCH_BIN} is not built: run `cargo build --release` in dataplane/ "
                    "(the contract cannot be checked against the target without it)")
    return pm.from_p4info(target.target_p4info())


def test_target_matches_p4info_file(target_model, file_model):
    problems = pm.diff(target_model, file_model, "p4netem-switch", "p4info file")
    assert not problems, "p4netem-switch and p4src/p4netem.p4info.txtpb disagree:\n" + "\n".join(problems)


def test_target_matches_source(target_model, source_model):
    problems = pm.diff(target_model, source_model, "p4netem-switch", "P4 source")
    assert not problems, "p4netem-switch and the P4 source disagree:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# the comparison catches changes (P4Info side): mutate the parsed file in memory
# ---------------------------------------------------------------------------------------------

def _table(info, short):
    return next(t for t in info.tables if t.preamble.name == f"P4netemIngress.{short}")


def _action(info, short):
    return next(a for a in info.actions if a.preamble.name.endswith(short))


def _register(info, short):
    return next(r for r in info.registers if r.preamble.name.endswith(short))


def _key(table, name):
    return next(f for f in table.match_fields if f.name == name)


def _drop_key(info):
    t = _table(info, "classifier")
    keep = [f for f in t.match_fields if f.name != "meta.dscp"]
    del t.match_fields[:]
    t.match_fields.extend(keep)


def _drop_counter(info):
    keep = [c for c in info.counters if not c.preamble.name.endswith("profile_dup")]
    del info.counters[:]
    info.counters.extend(keep)


def _scope_of_noaction(info):
    ref = next(r for r in _table(info, "l2_fwd").action_refs if r.id == 21257015)
    ref.scope = pt.enum_value("p4.config.v1.ActionRef.Scope", "TABLE_AND_DEFAULT")


P4INFO_MUTATIONS = {
    "key width": (lambda i: setattr(_key(_table(i, "classifier"), "meta.ipv4_src"), "bitwidth", 16),
                  "tables['P4netemIngress.classifier']['keys']"),
    "missing key": (_drop_key, "tables['P4netemIngress.classifier']['keys']"),
    "match kind": (lambda i: setattr(_key(_table(i, "classifier"), "meta.l4_dst_port"), "match_type",
                                     pt.enum_value(pm.MATCH_TYPE, "TERNARY")),
                   "tables['P4netemIngress.classifier']['keys']"),
    "table id": (lambda i: setattr(_table(i, "port_map").preamble, "id", 0x02000009),
                 "tables['P4netemIngress.port_map']['id']"),
    "table size": (lambda i: setattr(_table(i, "profile"), "size", 4096),
                   "tables['P4netemIngress.profile']['size']"),
    "action scope": (_scope_of_noaction, "tables['P4netemIngress.l2_fwd']['actions']"),
    "default action": (lambda i: setattr(_table(i, "port_map").initial_default_action, "action_id", 0x01000002),
                       "tables['P4netemIngress.port_map']['default']"),
    "param width": (lambda i: setattr(_action(i, "set_impairment").params[11], "bitwidth", 8),
                    "actions['P4netemIngress.set_impairment']['params'][11]"),
    "param name": (lambda i: setattr(_action(i, "set_profile").params[2], "name", "ue"),
                   "actions['P4netemIngress.set_profile']['params'][2]"),
    "action id": (lambda i: setattr(_action(i, "set_egress_port").preamble, "id", 0x01000042),
                  "actions['P4netemIngress.set_egress_port']['id']"),
    "register width": (lambda i: setattr(_register(i, "ge_state").type_spec.bitstring.bit, "bitwidth", 16),
                       "registers['P4netemIngress.ge_state']['type']"),
    "register size": (lambda i: setattr(_register(i, "dist_table"), "size", 8192),
                      "registers['P4netemIngress.dist_table']['size']"),
    "counter unit": (lambda i: setattr(i.counters[0].spec, "unit", pt.enum_value(pm.COUNTER_UNIT, "PACKETS")),
                     "counters['P4netemIngress.profile_in']['unit']"),
    "missing counter": (_drop_counter, "counters['P4netemIngress.profile_dup']"),
    "digest field width": (lambda i: setattr(i.type_info.structs["mac_learn_digest_t"].members[1].type_spec
                                             .bitstring.bit, "bitwidth", 16),
                           "digests['mac_learn_digest_t']['fields']"),
    "digest id": (lambda i: setattr(i.digests[0].preamble, "id", 0x17000001),
                  "digests['mac_learn_digest_t']['id']"),
    "controller header field": (lambda i: setattr(i.controller_packet_metadata[1].metadata[0], "bitwidth", 16),
                                "controller_headers['packet_out']['fields'][0]"),
    "controller header id": (lambda i: setattr(i.controller_packet_metadata[0].preamble, "id", 0x04000003),
                             "controller_headers['packet_in']['id']"),
    "drop reasons reordered": (lambda i: _set_drop_reasons(i, lambda r: [r[1], r[0], *r[2:]]),
                               "counters['P4netemIngress.drops']['annotations']"),
}


def _set_drop_reasons(info, change):
    drops = next(c for c in info.counters if c.preamble.alias == "drops")
    anns = list(drops.preamble.annotations)
    i = next(k for k, a in enumerate(anns) if a.startswith("@p4netem_drop_reasons("))
    reasons = anns[i].split('"')[1].split()
    anns[i] = '@p4netem_drop_reasons("' + " ".join(change(reasons)) + '")'
    del drops.preamble.annotations[:]
    drops.preamble.annotations.extend(anns)


@pytest.mark.parametrize("mutation", sorted(P4INFO_MUTATIONS))
def test_diff_catches_p4info_change(mutation, p4info_message, source_model):
    mutate, where = P4INFO_MUTATIONS[mutation]
    mutated = copy.deepcopy(p4info_message)
    mutate(mutated)
    problems = pm.diff(source_model, pm.from_p4info(mutated), "P4 source", "mutated p4info")
    assert problems, f"changing the {mutation} went unnoticed"
    assert any(p.startswith(where) for p in problems), f"{mutation}: expected a difference at {where}, got {problems}"


# ---------------------------------------------------------------------------------------------
# the comparison catches changes (source side): edit a copy of one P4 file in memory
# ---------------------------------------------------------------------------------------------

SOURCE_MUTATIONS = {
    "metadata field width reaches the key": (
        "headers.p4", "    bit<6>      dscp;\n\n    /* Classification result. */",
        "    bit<8>      dscp;\n\n    /* Classification result. */",
        "tables['P4netemIngress.classifier']['keys']"),
    "typedef width reaches keys and params": (
        "defines.p4", "typedef bit<9>   port_t;", "typedef bit<10>  port_t;",
        "actions['P4netemIngress.set_egress_port']['params'][0]"),
    "table @id": ("forwarding.p4", "@id(0x02000001)", "@id(0x02000009)",
                  "tables['P4netemIngress.port_map']['id']"),
    "#define used as a size": ("defines.p4", "#define PD_COUNT             (MAX_PROFILES * 2)",
                               "#define PD_COUNT             4096", "counters['P4netemIngress.profile_in']['size']"),
    "key removed": ("classifier.p4", "            meta.dscp                      : ternary;\n", "",
                    "tables['P4netemIngress.classifier']['keys']"),
    "match kind": ("classifier.p4", "meta.l4_src_port               : range;",
                   "meta.l4_src_port               : ternary;", "tables['P4netemIngress.classifier']['keys']"),
    "action param width": ("profile.p4", "bit<16>       overhead_bytes,", "bit<8>        overhead_bytes,",
                           "actions['P4netemIngress.set_impairment']['params'][11]"),
    "register type": ("delay.p4", "register<bit<16>>(DIST_TABLE_SIZE) dist_table;",
                      "register<bit<32>>(DIST_TABLE_SIZE) dist_table;",
                      "registers['P4netemIngress.dist_table']['type']"),
    "counter unit": ("ingress.p4", "counter(PARSER_ERROR_KINDS, CounterType.packets) parser_errors;",
                     "counter(PARSER_ERROR_KINDS, CounterType.bytes) parser_errors;",
                     "counters['P4netemIngress.parser_errors']['unit']"),
    "action scope": ("profile.p4", "@defaultonly NoAction;", "NoAction;",
                     "tables['P4netemIngress.profile']['actions']"),
    "const default": ("forwarding.p4", "const default_action = NoAction();", "default_action = NoAction();",
                      "tables['P4netemIngress.l2_fwd']['const_default']"),
    "default action arguments": ("classifier.p4", "default_action = set_profile(0, 0, 0);",
                                 "default_action = set_profile(0, 1, 0);",
                                 "tables['P4netemIngress.classifier']['default']"),
    "digest field width": ("headers.p4", "    port_t     ingress_port;\n}\n\nstruct headers_t",
                           "    bit<16>    ingress_port;\n}\n\nstruct headers_t",
                           "digests['mac_learn_digest_t']['fields']"),
    "digest struct renamed": [("forwarding.p4", "digest<mac_learn_digest_t>", "digest<mac_learn_t>"),
                              ("headers.p4", "struct mac_learn_digest_t {", "struct mac_learn_t {"),
                              "digests['mac_learn"],
    "absolute @name dropped": ("rate.p4", '@name(".P4netemIngress.backlog_bytes")\n', "",
                               "registers['P4netemIngress.backlog_bytes']"),
    "controller header field": ("headers.p4", "    port_t egress_port;\n    bit<7> _pad;",
                                "    port_t egress_port;\n    bit<15> _pad;",
                                "controller_headers['packet_out']['fields'][1]"),
    "table never applied": ("classifier.p4", "        classifier.apply();\n", "",
                            "tables['P4netemIngress.classifier']"),
    "drop reason renamed": ("ingress.p4", 'loss_random loss_burst', 'loss_bernoulli loss_burst',
                            "counters['P4netemIngress.drops']['annotations']"),
}


@pytest.mark.parametrize("mutation", sorted(SOURCE_MUTATIONS))
def test_diff_catches_source_change(mutation, file_model):
    case = SOURCE_MUTATIONS[mutation]
    if isinstance(case, list):
        edits, where = case[:-1], case[-1]
    else:
        edits, where = [case[:3]], case[3]
    try:
        mutated = source_model_with(*edits)
    except P4SourceError as e:  # the extractor refusing the edited program also counts as caught
        pytest.fail(f"{mutation}: the mutated program should still be readable, got {e}")
    problems = pm.diff(mutated, file_model, "mutated source", "p4info file")
    assert problems, f"changing the {mutation} went unnoticed"
    assert any(p.startswith(where) for p in problems), f"{mutation}: expected a difference at {where}, got {problems}"


# ---------------------------------------------------------------------------------------------
# the extractor refuses what p4c would refuse (so a broken program cannot slip through as "equal")
# ---------------------------------------------------------------------------------------------

# One 0 per set_impairment param, however many the P4Info lists.
_SET_IMPAIRMENT_PARAMS = next(len(a.params) for a in parse_p4info(P4INFO_FILE.read_text()).actions
                              if a.preamble.name.endswith(".set_impairment"))

REJECTED = {
    "reserved word as a name": ("headers.p4", "    bit<8>      ttl;", "    bit<8>      state;", "reserved word"),
    "wrong @id prefix": ("forwarding.p4", "@id(0x02000001)", "@id(0x01000009)", "wrong 8-bit prefix"),
    "duplicate @id": ("forwarding.p4", "@id(0x02000002)", "@id(0x02000001)", "assigned to multiple"),
    "table applied twice": ("profile.p4", "        profile.apply();\n",
                            "        profile.apply();\n        profile.apply();\n", "applied from 2 places"),
    "unknown key field": ("classifier.p4", "meta.ip_proto                  : ternary;",
                          "meta.ip_protocol              : ternary;", "has no field ip_protocol"),
    "digest without struct type": ("forwarding.p4", "digest<mac_learn_digest_t>(", "digest(",
                                   "explicit struct type"),
    "default action outside the list": ("profile.p4", "default_action = NoAction();",
                                        "default_action = set_impairment(" + ",".join("0" * _SET_IMPAIRMENT_PARAMS) + ");\n"
                                        "        /* */", None),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_extractor_rejects(case):
    file, old, new, message = REJECTED[case]
    if message is None:
        # set_impairment is in the list: this edit is legal, the model must change instead.
        model = source_model_with((file, old, new))
        assert model["tables"]["P4netemIngress.profile"]["default"]["action"] == "P4netemIngress.set_impairment"
        return
    with pytest.raises(P4SourceError, match=message):
        source_model_with((file, old, new))


# ---------------------------------------------------------------------------------------------
# one schema: the P4 constants, the P4Info, the switch (generated from it) and the control plane
# (read from it) agree on every param, width, id and drop reason
# ---------------------------------------------------------------------------------------------

def _source_drop_constants(program) -> dict[str, int]:
    """The DROP_<REASON> #defines of the P4 source (the reasons the program itself counts)."""
    skip = {"DROP_REASONS", "DROP_COUNTER_SIZE"}
    out = {}
    for name, body in program.defines.items():
        if name.startswith("DROP_") and name not in skip:
            assert len(body) == 1 and body[0].kind == "int", f"{name} is not a plain integer"
            out[name.removeprefix("DROP_").lower()] = body[0].value
    return out


def _drop_reasons(model) -> list[str]:
    anns = model["counters"]["P4netemIngress.drops"]["annotations"]
    found = [a for a in anns if a.startswith("@p4netem_drop_reasons(")]
    assert len(found) == 1, f"the drops counter needs one @p4netem_drop_reasons annotation, has {anns}"
    return found[0].split('"')[1].split()


def check_p4_drop_constants(program, reasons: list[str]) -> list[str]:
    problems = []
    constants = _source_drop_constants(program)
    for name, value in sorted(constants.items()):
        if name not in reasons:
            problems.append(f"DROP_{name.upper()} = {value} names no reason of {reasons}")
        elif reasons.index(name) != value:
            problems.append(f"DROP_{name.upper()} = {value}, but {name} is reason {reasons.index(name)}")
    stride = program.defines["DROP_REASONS"][0].value
    if stride < len(reasons):
        problems.append(f"DROP_REASONS = {stride} leaves no cell for {reasons[stride:]}")
    return problems


def test_p4_drop_constants_match_the_annotation(file_model):
    program = p4source.load(P4_MAIN)
    problems = check_p4_drop_constants(program, _drop_reasons(file_model))
    assert not problems, "\n".join(problems)


def test_p4_drop_constant_mutation_is_caught(file_model):
    text = (P4_INCLUDE / "defines.p4").read_text()
    old = "#define DROP_QUEUE_FULL      2"
    assert text.count(old) == 1
    program = p4source.load(P4_MAIN, overrides={str(P4_INCLUDE / "defines.p4"): text.replace(old, old[:-1] + "3")})
    assert any("DROP_QUEUE_FULL" in p for p in check_p4_drop_constants(program, _drop_reasons(file_model)))


def python_schema_problems(info) -> list[str]:
    """Where the control plane's view (p4netem.pipeline, the profile encoders) differs from `info`."""
    from p4netem import pipeline as pl
    from p4netem.profiles import IMPAIRMENT_PARAMS, RADIO_PARAMS

    model = pm.from_p4info(info)
    problems = []
    for action, names, full in ((pl.SET_IMPAIRMENT, pl.IMPAIRMENT_PARAMS, IMPAIRMENT_PARAMS),
                                (pl.SET_RADIO, pl.RADIO_PARAMS, RADIO_PARAMS)):
        want = [(p["id"], p["name"], p["bits"]) for p in model["actions"][action]["params"]]
        if list(full) != want:
            problems.append(f"{action}: python {list(full)} != p4info {want}")
        if list(names) != [n for _, n, _ in want]:
            problems.append(f"{action}: pipeline names {list(names)} != p4info {[n for _, n, _ in want]}")
    reasons = _drop_reasons(model)
    python = [r.name.lower() for r in sorted(pl.DropReason)]
    if python != reasons or [int(r) for r in sorted(pl.DropReason)] != list(range(len(reasons))):
        problems.append(f"drop reasons: python {python} != p4info {reasons}")
    stride = model["counters"][pl.DROPS]["size"] // model["counters"][pl.PROFILE_IN]["size"]
    if pl.DROP_REASONS_PER_PD != stride:
        problems.append(f"drop stride: python {pl.DROP_REASONS_PER_PD} != p4info {stride}")
    return problems


def test_python_schema_matches_p4info(p4info_message):
    problems = python_schema_problems(p4info_message)
    assert not problems, "\n".join(problems)


PYTHON_SCHEMA_MUTATIONS = {
    "impairment param width": P4INFO_MUTATIONS["param width"][0],
    "radio param renamed": lambda i: setattr(_action(i, "set_radio").params[3], "name", "idle_connected_ns"),
    "drop reasons reordered": P4INFO_MUTATIONS["drop reasons reordered"][0],
    "drop stride": lambda i: setattr(_drop_counter_of(i), "size", 2 * _drop_counter_of(i).size),
}


def _drop_counter_of(info):
    return next(c for c in info.counters if c.preamble.alias == "drops")


@pytest.mark.parametrize("mutation", sorted(PYTHON_SCHEMA_MUTATIONS))
def test_python_schema_check_catches_p4info_change(mutation, p4info_message):
    """The control plane reads the P4Info at import: a P4Info that changed afterwards (here: a
    mutated copy) no longer matches what it uses, and the check says so."""
    mutated = copy.deepcopy(p4info_message)
    PYTHON_SCHEMA_MUTATIONS[mutation](mutated)
    assert python_schema_problems(mutated)


def test_encoders_write_exactly_the_p4info_params():
    """An encoder that leaves out or invents a param is refused (the guard of every encode)."""
    from p4netem.profiles.action_params import ParamWidths
    from p4netem import pipeline as pl
    from p4netem.profiles import IMPAIRMENT_PARAMS

    widths = ParamWidths(pl.SET_IMPAIRMENT, IMPAIRMENT_PARAMS)
    params = pl.impairment_params()
    widths.check_encoded(params)
    with pytest.raises(AssertionError, match="left out"):
        widths.check_encoded({k: v for k, v in params.items() if k != "ge_r"})
    with pytest.raises(AssertionError, match="not in the P4Info"):
        widths.check_encoded({**params, "ge_q": 0})


# ---------------------------------------------------------------------------------------------
# Exp2Neg's constants: P4 (exp2.p4's #defines) and the switch (exp2.rs) multiply the same numbers
# in the same order, and they are 2^(-2^j/256) and ln 2 in Q32; its users (the PF decay, the
# on/off link) compute the switch's vectors when transcribed from the P4 source
# ---------------------------------------------------------------------------------------------

BEARER_RS = ROOT / "dataplane" / "src" / "stage" / "bearer.rs"
EXP2_RS = ROOT / "dataplane" / "src" / "exp2.rs"
ONOFF_RS = ROOT / "dataplane" / "src" / "stage" / "onoff.rs"


def _exact_exp2_constants() -> tuple[list[int], int]:
    from decimal import Decimal, getcontext

    getcontext().prec = 50
    two = Decimal(2)
    bits = [int((two ** (32 - Decimal(2 ** j) / 256)).to_integral_value()) for j in range(8)]
    return bits, int((two.ln() * two ** 32).to_integral_value())


def _p4_exp2_constants(program) -> tuple[list[int], int]:
    def value(name):
        body = program.defines[name]
        assert len(body) == 1 and body[0].kind == "int", f"{name} is not a plain integer"
        return body[0].value
    return [value(f"EXP2_Q32_{j}") for j in range(8)], value("EXP2_LN2_Q32")


def _rust_exp2_constants(text: str) -> tuple[list[int], int]:
    import re

    bits = re.search(r"pub const EXP2_BITS_Q32: \[u64; 8\]\s*=\s*\[([^\]]*)\]", text)
    ln2 = re.search(r"pub const EXP2_LN2_Q32: u64 = (\d+);", text)
    assert bits and ln2, "EXP2_BITS_Q32 / EXP2_LN2_Q32 not found in exp2.rs"
    return [int(v.replace("_", "")) for v in bits.group(1).split(",") if v.strip()], int(ln2.group(1))


def exp2_constant_problems(program, rust_text: str) -> list[str]:
    exact, p4, rust = _exact_exp2_constants(), _p4_exp2_constants(program), _rust_exp2_constants(rust_text)
    return [f"{side} Exp2Neg constants {got} != 2^(-2^j/256), ln 2 in Q32 {exact}"
            for side, got in (("P4", p4), ("Rust", rust)) if got != exact]


def test_exp2_constants_agree():
    problems = exp2_constant_problems(p4source.load(P4_MAIN), EXP2_RS.read_text())
    assert not problems, "\n".join(problems)


def test_exp2_constant_mutation_is_caught():
    p4_text, rust_text = (P4_INCLUDE / "exp2.p4").read_text(), EXP2_RS.read_text()
    old = "#define EXP2_Q32_5  3938502376"
    assert p4_text.count(old) == 1 and rust_text.count("3938502376") == 1
    mutated = p4source.load(P4_MAIN, overrides={str(P4_INCLUDE / "exp2.p4"): p4_text.replace(old, old[:-1] + "7")})
    assert any(p.startswith("P4 ") for p in exp2_constant_problems(mutated, rust_text))
    assert any(p.startswith("Rust ") for p in exp2_constant_problems(p4source.load(P4_MAIN),
                                                                      rust_text.replace("3938502376", "3938502377")))


M64, M128 = (1 << 64) - 1, (1 << 128) - 1


def p4_exp2_neg(a: int, halvings: int, f56: int, exp2: list[int], ln2: int) -> int:
    """exp2.p4's Exp2Neg statement by statement, with P4's bit widths (bit<64>, bit<128>)."""
    if halvings >= 64:
        return 0
    s = a >> (halvings & 0xFF)
    k = (f56 >> 48) & 0xFF
    r = f56 & 0xFFFFFFFFFFFF
    t = 1 << 32
    for j in range(7, -1, -1):
        if (k >> j) & 1:
            t = ((t * exp2[j]) & M128) >> 32
    x = ((s * t + (1 << 31)) & M128) >> 32
    d = ((ln2 * r) & M128) >> 40
    return (x - ((((x * d) & M128) + (1 << 47)) >> 48)) & M64


def p4_pf_decay(avg: int, at: int, now: int, wlog: int, exp2: list[int], ln2: int) -> int:
    """bearer.p4's PfDecay statement by statement."""
    dt = now - at if now > at else 0
    w = min(wlog, 63)
    halvings = dt >> w
    rest = dt & (((1 << w) - 1) & M64)
    f56 = (rest << (56 - w)) & M64 if w <= 56 else rest >> (w - 56)
    return p4_exp2_neg(avg, halvings, f56, exp2, ln2)


def p4_onoff_p_on(state: int, dt: int, on_prob: int, recip: int, exp2: list[int], ln2: int) -> int:
    """onoff.p4's OnOffLink up to the draw, statement by statement: P(on) in Q32 for a packet dt ns
    after the pd's previous one saw the link in `state` (dt as OnOffLink computes it)."""
    y = (dt * recip) & M128
    e = p4_exp2_neg(1 << 32, (y >> 64) & M64, (y & M64) >> 8, exp2, ln2)
    pi = on_prob
    if state == 2:  # ONOFF_OFF
        return (pi - (((pi * e) & M128) >> 32)) & M128
    return (pi + (((((1 << 32) - pi) * e) & M128) >> 32)) & M128


def _rust_vectors(text: str, name: str, arity: int) -> list[tuple[int, ...]]:
    import re

    block = re.search(rf"const {name}: \[\([^\]]*\); \d+\] = \[(.*?)\];", text, re.S)
    assert block, f"{name} not found"
    row = r"\(" + ", ".join([r"(\d+)"] * arity) + r"\)"
    return [tuple(int(v) for v in m) for m in re.findall(row, block.group(1))]


def test_p4_pf_decay_computes_the_switchs_vectors():
    """The switch's unit test pins pf_decay on PF_DECAY_VECTORS; P4's arithmetic, transcribed with
    the P4 source's constants, must give the same bits on them."""
    exp2, ln2 = _p4_exp2_constants(p4source.load(P4_MAIN))
    vectors = _rust_vectors(BEARER_RS.read_text(), "PF_DECAY_VECTORS", 4)
    assert len(vectors) >= 5
    for avg, dt, w, want in vectors:
        assert p4_pf_decay(avg, 1000, 1000 + dt, w, exp2, ln2) == want, (avg, dt, w)
    bad = list(exp2)
    bad[3] += 1
    assert any(p4_pf_decay(avg, 0, dt, w, bad, ln2) != want for avg, dt, w, want in vectors), \
        "a changed constant must change some vector"


def test_p4_onoff_computes_the_switchs_vectors():
    """The switch's unit test pins onoff::p_on on ONOFF_VECTORS; P4's arithmetic, transcribed with
    the P4 source's constants, must give the same bits on them."""
    exp2, ln2 = _p4_exp2_constants(p4source.load(P4_MAIN))
    vectors = _rust_vectors(ONOFF_RS.read_text(), "ONOFF_VECTORS", 5)
    assert len(vectors) >= 6
    for state, dt, pi, recip, want in vectors:
        assert p4_onoff_p_on(state, dt, pi, recip, exp2, ln2) == want, (state, dt, pi, recip)
    bad = list(exp2)
    bad[7] += 1 << 16  # P(on) is Q32: a change of a few units in 2^32 must show
    assert any(p4_onoff_p_on(st, dt, pi, r, bad, ln2) != want for st, dt, pi, r, want in vectors), \
        "a changed constant must change some vector"


# ---------------------------------------------------------------------------------------------
# netem's signed overheads: rate.p4's wire_bytes and cell_link_bytes, transcribed statement by
# statement (bit<32>/bit<64> wrap, |-| saturates), compute the switch's WIRE_VECTORS; the
# transcription is of the P4 text pinned below, so a change to either function fails here
# ---------------------------------------------------------------------------------------------

RATE_RS = ROOT / "dataplane" / "src" / "stage" / "rate.rs"
U32, U64 = (1 << 32) - 1, (1 << 64) - 1

P4_WIRE_BYTES = """
bit<32> wire_bytes(in bit<32> frame, in bit<16> overhead) {
    bit<32> wire = frame + (bit<32>)overhead;
    if (overhead[15:15] == 1) {
        wire = frame |-| (bit<32>)(16w0 - overhead);
    }
    return wire;
}"""
P4_CELL_LINK_BYTES = """
bit<64> cell_link_bytes(in impairment_t imp) {
    bit<64> cell = (bit<64>)imp.cell_bytes;
    bit<64> on_link = cell + (bit<64>)imp.cell_overhead_bytes;
    if (imp.cell_overhead_bytes[15:15] == 1) {
        on_link = cell |-| (bit<64>)(16w0 - imp.cell_overhead_bytes);
    }
    return on_link;
}"""


def p4_wire_bytes(frame: int, overhead: int) -> int:
    wire = (frame + overhead) & U32
    if overhead >> 15 == 1:
        wire = max(0, frame - ((0 - overhead) & 0xFFFF))
    return wire


def p4_cell_link_bytes(cell: int, cell_overhead: int) -> int:
    on_link = (cell + cell_overhead) & U64
    if cell_overhead >> 15 == 1:
        on_link = max(0, cell - ((0 - cell_overhead) & 0xFFFF))
    return on_link


def p4_link_bytes(wire: int, cell: int, cell_overhead: int) -> int:
    """rate.p4 service_ns's byte count (the cell count's steps as tests/unit/test_cell_profiles.py
    checks them exhaustively)."""
    if cell == 0:
        return wire
    recip = (1 << 32) // cell
    cells = ((wire * recip) & U64) >> 32
    if (wire - cells * cell) & U64 >= cell:
        cells += 1
    if wire > (cells * cell) & U64:
        cells += 1
    return (cells * p4_cell_link_bytes(cell, cell_overhead)) & U64


def _normalised(text: str) -> str:
    return " ".join(text.split())


def test_p4_wire_bytes_is_the_transcribed_text():
    rate_p4 = _normalised((P4_INCLUDE / "rate.p4").read_text())
    for fn in (P4_WIRE_BYTES, P4_CELL_LINK_BYTES):
        assert _normalised(fn) in rate_p4, f"rate.p4 changed {fn.split('(')[0].strip()}: update its transcription"
    assert "bytes = cells * cell_link_bytes(imp);" in rate_p4
    assert rate_p4.count("wire_bytes(standard_metadata.packet_length, meta.imp.overhead_bytes)") == 2


def test_p4_wire_bytes_computes_the_switchs_vectors():
    """The switch's unit test pins wire_bytes and service_ns on WIRE_VECTORS (overheads as their
    params' 16 bits); the P4 transcription must give the same on each."""
    vectors = _rust_vectors(RATE_RS.read_text(), "WIRE_VECTORS", 6)
    assert len(vectors) >= 12 and any(o >> 15 for _, o, _, _, _, _ in vectors) \
        and any(co >> 15 for _, _, _, co, _, _ in vectors), "negative overheads must be among the vectors"
    for frame, overhead, cell, cell_overhead, wire, link in vectors:
        assert p4_wire_bytes(frame, overhead) == wire, (frame, overhead)
        assert p4_link_bytes(wire, cell, cell_overhead) == link, (frame, overhead, cell, cell_overhead)
    # Read unsigned (the old rule), a negative overhead gives other bytes: the vectors tell.
    assert any((f + o) & U32 != w for f, o, _, _, w, _ in vectors)


# ---------------------------------------------------------------------------------------------
# PIE: pie.p4's update, transcribed statement by statement with its constants read from the P4
# source (defines.p4), computes the switch's PIE_VECTORS; a changed constant changes a vector
# ---------------------------------------------------------------------------------------------

PIE_RS = ROOT / "dataplane" / "src" / "stage" / "pie.rs"
PIE_CONSTANTS = ("PIE_MAX_PROB", "PIE_PROB_10PCT", "PIE_PROB_1PCT", "PIE_PROB_1E3", "PIE_PROB_1E4", "PIE_PROB_1E5",
                 "PIE_PROB_1E6", "PIE_STEP_2PCT", "PIE_CLAMP_2PCT", "PIE_QDELAY_BOOST_NS")


def _p4_pie_constants(program) -> dict[str, int]:
    out = {}
    for name in PIE_CONSTANTS:
        body = program.defines[name]
        assert len(body) == 1 and body[0].kind == "int", f"{name} is not a plain integer"
        out[name] = body[0].value
    return out


def p4_pie_update(prob, qold, burst, accu, t, free_at, target, period, alpha, beta, max_burst, c):
    """pie.p4's "One update at T = next" block (bit<64> registers, bit<128> products)."""
    q = free_at - t if free_at > t else 0
    a, b = alpha, beta
    if prob < c["PIE_PROB_10PCT"]:
        a, b = a >> 1, b >> 1
        for band in ("PIE_PROB_1PCT", "PIE_PROB_1E3", "PIE_PROB_1E4", "PIE_PROB_1E5", "PIE_PROB_1E6"):
            if prob < c[band]:
                a, b = a >> 2, b >> 2
    m128 = (1 << 128) - 1
    inc = (a * q + b * q) & m128
    dec = (a * target + b * qold) & m128
    up = inc >= dec
    mag = (inc - dec) & m128 if up else (dec - inc) & m128
    if up and mag > c["PIE_STEP_2PCT"] and prob >= c["PIE_PROB_10PCT"]:
        mag = c["PIE_CLAMP_2PCT"]
    if q > c["PIE_QDELAY_BOOST_NS"]:
        if up:
            mag = mag + c["PIE_STEP_2PCT"]
        elif mag > c["PIE_STEP_2PCT"]:
            mag = mag - c["PIE_STEP_2PCT"]
        else:
            mag, up = c["PIE_STEP_2PCT"] - mag, True
    update_prob = True
    np = 0
    if up:
        np = prob + mag
        if np > c["PIE_MAX_PROB"]:
            np, update_prob = c["PIE_MAX_PROB"], False
    elif mag < prob:
        np = prob - mag
    p = np & U64
    if q == 0 and qold == 0 and update_prob:
        p = p - (p >> 6)
    burst = burst - period if burst > period else 0
    settled = False
    if q < (target >> 1) and qold < (target >> 1) and p == 0:
        burst, accu = max_burst, 0
        settled = q == 0 and qold == 0
    return p, q, burst, accu, int(settled)


# sha256 (first 16 hex digits) of pie.p4's update block, whitespace collapsed: p4_pie_update
# transcribes exactly this text.
P4_PIE_UPDATE_SHA = "1feb108ecea9ce6c"


def _p4_pie_update_block(text: str) -> str:
    start = text.index("/* One update at T = next. */")
    return " ".join(text[start:text.index("n = n + 1;", start)].split())


def test_p4_pie_update_is_the_transcribed_text():
    import hashlib

    block = _p4_pie_update_block((P4_INCLUDE / "pie.p4").read_text())
    assert hashlib.sha256(block.encode()).hexdigest()[:16] == P4_PIE_UPDATE_SHA, \
        "pie.p4's update changed: bring p4_pie_update (and the switch's PIE_VECTORS) in step, then the hash"
    mutated = block.replace("p = p - (p >> 6);", "p = p - (p >> 5);")
    assert mutated != block and hashlib.sha256(mutated.encode()).hexdigest()[:16] != P4_PIE_UPDATE_SHA


def test_p4_pie_computes_the_switchs_vectors():
    """The switch's unit test pins pie::update on PIE_VECTORS; pie.p4's arithmetic, transcribed with
    the P4 source's constants, must give the same on each; and those constants are Linux's."""
    c = _p4_pie_constants(p4source.load(P4_MAIN))
    full = (1 << 56) - 1
    assert c == {"PIE_MAX_PROB": full, "PIE_PROB_10PCT": full // 10, "PIE_PROB_1PCT": full // 100,
                 "PIE_PROB_1E3": full // 1000, "PIE_PROB_1E4": full // 10**4, "PIE_PROB_1E5": full // 10**5,
                 "PIE_PROB_1E6": full // 10**6, "PIE_STEP_2PCT": full // 50, "PIE_CLAMP_2PCT": (full // 100) * 2,
                 "PIE_QDELAY_BOOST_NS": 250_000_000}
    vectors = _rust_vectors(PIE_RS.read_text(), "PIE_VECTORS", 16)
    assert len(vectors) >= 10
    for row in vectors:
        assert p4_pie_update(*row[:11], c) == row[11:], row[:11]
    bad = dict(c, PIE_PROB_1E3=c["PIE_PROB_1E3"] * 2)
    assert any(p4_pie_update(*row[:11], bad) != row[11:] for row in vectors), "a changed band must change a vector"
    bad = dict(c, PIE_STEP_2PCT=c["PIE_STEP_2PCT"] + 1)
    assert any(p4_pie_update(*row[:11], bad) != row[11:] for row in vectors), "a changed step must change a vector"


# ---------------------------------------------------------------------------------------------
# Exact trace delivery: trace.p4's TraceSchedule, transcribed statement by statement (bit<32> and
# bit<64> wrap, bit<128> products, constants from defines.p4), computes the switch's TRACE_VECTORS,
# among them registers that hold no trace as the controller loads it (never loaded, no
# reciprocal, out of order, per-pd state written by a client): no packet leaves before it is ready
# ---------------------------------------------------------------------------------------------

TRACE_RS = ROOT / "dataplane" / "src" / "stage" / "trace.rs"
TRACE_CONSTANTS = ("TRACE_CELLS", "TRACE_MS_CELLS", "TRACE_OPPORTUNITY", "TRACE_FRAME_ADJUST", "NS_PER_MS",
                   "TRACE_RECIP_MS")


def p4_trace_schedule(ms_cells: dict[int, int], first_at_cells: dict[int, int], imp: dict[str, int],
                      t: int, length: int, cycle: int, pos: int, left: int, c: dict[str, int], clamp: bool = True):
    """trace.p4's TraceSchedule apply block; registers as {cell: value} (unwritten cells read 0,
    as p4netem-switch reads a cell outside the register). Returns (begin, departure, cycle, pos,
    left). `clamp=False`: without the rule that keeps begin and departure at or after t."""
    def read(cells: dict[int, int], size: int, index: int) -> int:
        return cells.get(index & U32, 0) if (index & U32) < size else 0

    def ms(p: int) -> int:
        return read(ms_cells, c["TRACE_CELLS"], imp["trace_base"] + p)

    ns_ms, full = c["NS_PER_MS"], c["TRACE_OPPORTUNITY"]
    period = (imp["trace_period_ms"] * ns_ms) & U64
    size = length - c["TRACE_FRAME_ADJUST"] if length > c["TRACE_FRAME_ADJUST"] + 1 else 1
    size = min(size, full)
    fresh = cycle == 0
    if fresh:
        cycle = t
    cur = (cycle + ms(pos) * ns_ms) & U64
    if not fresh and left > 0 and cur >= t:
        pass
    elif not fresh and cur >= t:
        pos = (pos + 1) & U32
        if pos >= imp["trace_len"]:
            pos, cycle = 0, (cycle + period) & U64
        left = full
    else:
        d = (t - cycle) & U64
        if d >= period and period != 0:
            k = ((d * imp["trace_period_recip"]) & M128) >> 64
            kp = min((k * period) & U64, d)
            if (d - kp) & U64 >= period:
                kp = min((kp + period) & U64, d)
            cycle, d = (cycle + kp) & U64, (d - kp) & U64
        q = ((d * c["TRACE_RECIP_MS"]) & M128) >> 64
        if (d - q * ns_ms) & U64 >= ns_ms:
            q += 1
        if (q * ns_ms) & U64 < d:
            q += 1
        pos = read(first_at_cells, c["TRACE_MS_CELLS"], imp["trace_ms_base"] + (q & U32))
        left = full
    begin = (cycle + ms(pos) * ns_ms) & U64
    if clamp and begin < t:
        begin = t
    if left >= size:
        left -= size
    else:
        rest = size - left
        pos = (pos + 1) & U32
        if pos >= imp["trace_len"]:
            pos, cycle = 0, (cycle + period) & U64
        left = full - rest
    departure = (cycle + ms(pos) * ns_ms) & U64
    if clamp and departure < begin:
        departure = begin
    return begin, departure, cycle, pos, left


# sha256 (first 16 hex digits) of TraceSchedule's apply block, whitespace collapsed:
# p4_trace_schedule transcribes exactly this text.
P4_TRACE_SCHEDULE_SHA = "8f80831b681f6a2f"


def _p4_trace_schedule_block(text: str) -> str:
    start = text.index("apply {", text.index("control TraceSchedule("))
    return " ".join(text[start:text.index("#endif", start)].split())


def _trace_row(row: tuple[int, ...]):
    base, tlen, m0, m1, m2, f0, f1, f2, f3, period, recip, cycle, pos, left, t, length = row[:16]
    imp = {"trace_base": base, "trace_len": tlen, "trace_ms_base": 0, "trace_period_ms": period,
           "trace_period_recip": recip}
    return ({0: m0, 1: m1, 2: m2}, {0: f0, 1: f1, 2: f2, 3: f3}, imp, t, length, cycle, pos, left), row[16:]


def test_p4_trace_schedule_is_the_transcribed_text():
    import hashlib

    block = _p4_trace_schedule_block((P4_INCLUDE / "trace.p4").read_text())
    assert hashlib.sha256(block.encode()).hexdigest()[:16] == P4_TRACE_SCHEDULE_SHA, \
        "trace.p4's TraceSchedule changed: bring p4_trace_schedule (and the switch's TRACE_VECTORS) in step, then the hash"
    mutated = block.replace("if (begin < t) { begin = t; }", "")
    assert mutated != block and hashlib.sha256(mutated.encode()).hexdigest()[:16] != P4_TRACE_SCHEDULE_SHA


def test_p4_trace_schedule_computes_the_switchs_vectors():
    """The switch's unit test pins trace::schedule on TRACE_VECTORS; trace.p4's TraceSchedule,
    transcribed with the P4 source's constants, must give the same on each, and never a begin
    before t or a departure before the begin."""
    program = p4source.load(P4_MAIN)
    c = {}
    for name in TRACE_CONSTANTS:
        body = program.defines[name]
        assert len(body) == 1 and body[0].kind == "int", f"{name} is not a plain integer"
        c[name] = body[0].value
    assert c["TRACE_RECIP_MS"] == 2**64 // c["NS_PER_MS"] and c["TRACE_OPPORTUNITY"] == 1504
    vectors = _rust_vectors(TRACE_RS.read_text(), "TRACE_VECTORS", 21)
    assert len(vectors) >= 12
    for row in vectors:
        args, want = _trace_row(row)
        got = p4_trace_schedule(*args, c)
        assert got == want, row[:16]
        assert args[3] <= got[0] <= got[1], row[:16]
    # Without the rule that no packet leaves before it is ready, the rows of registers that hold
    # no loaded trace differ (an opportunity in the past): the vectors tell.
    assert any(p4_trace_schedule(*_trace_row(row)[0], c, clamp=False) != _trace_row(row)[1] for row in vectors)


# ---------------------------------------------------------------------------------------------
# The value sets of set_impairment's enum params (aqm, bearer_sched): the same names and numbers in
# p4src's defines, the switch's contract.rs and the control plane's pipeline.py
# ---------------------------------------------------------------------------------------------

CONTRACT_RS = ROOT / "dataplane" / "src" / "contract.rs"


def enum_value_problems(defines_text: str, contract_rs: str, enums: dict) -> list[str]:
    import re

    problems = []
    for prefix, enum in enums.items():
        rust = {m[0]: int(m[1]) for m in re.findall(rf"pub const {prefix}(\w+): u8 = (\d+);", contract_rs)}
        p4 = {m[0]: int(m[1]) for m in re.findall(rf"#define {prefix}(\w+)\s+(\d+)\b", defines_text)}
        python = {m.name: int(m) for m in enum}
        if rust != python:
            problems.append(f"{prefix}*: contract.rs {rust} != pipeline.py {python}")
        for name, value in python.items():
            if p4.get(name) != value:
                problems.append(f"{prefix}{name}: defines.p4 has {p4.get(name)}, pipeline.py {value}")
    return problems


def _enum_sources():
    from p4netem import pipeline as pl

    return ((P4_INCLUDE / "defines.p4").read_text(), CONTRACT_RS.read_text(),
            {"AQM_": pl.Aqm, "BEARER_": pl.BearerSched})


def test_enum_param_values_agree():
    problems = enum_value_problems(*_enum_sources())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("where, old, new", [
    ("p4", "#define AQM_PIE              3", "#define AQM_PIE              4"),
    ("rust", "pub const AQM_PIE: u8 = 3;", "pub const AQM_PIE: u8 = 4;"),
    ("rust", "pub const BEARER_PF: u8 = 2;\n", ""),
])
def test_enum_param_values_catch_a_mutation(where: str, old: str, new: str):
    defines, rust, enums = _enum_sources()
    if where == "p4":
        assert defines.count(old) == 1
        defines = defines.replace(old, new)
    else:
        assert rust.count(old) == 1
        rust = rust.replace(old, new)
    assert enum_value_problems(defines, rust, enums)


def test_enum_param_values_catch_a_python_mutation():
    from enum import IntEnum

    defines, rust, enums = _enum_sources()
    enums["AQM_"] = IntEnum("Aqm", [("TAIL_DROP", 0), ("CODEL", 1), ("RED", 2), ("PIE", 5)])
    assert enum_value_problems(defines, rust, enums)


# ---------------------------------------------------------------------------------------------
# action params -> metadata (the P4Info says what a controller writes, not where the program
# puts it: a param left unassigned, or assigned to another field, would compile and match)
# ---------------------------------------------------------------------------------------------

def _action_block(text: str, action: str) -> tuple[list[str], str]:
    """The param names of `action` and its body, from the source text."""
    import re

    m = re.search(rf"action {action}\((.*?)\)\s*\{{(.*?)\n    \}}", text, re.S)
    assert m, f"action {action} not found"
    params = [p.split()[-1] for p in m.group(1).split(",")]
    return params, m.group(2)


def _struct_fields(text: str, struct: str) -> list[str]:
    import re

    m = re.search(rf"struct {struct} \{{(.*?)\n\}}", text, re.S)
    assert m, f"struct {struct} not found"
    return re.findall(r"^\s*[\w<>]+\s+(\w+);", m.group(1), re.M)


def metadata_assignment_problems(texts: dict[str, str]) -> list[str]:
    """Each param of set_impairment / set_radio is copied, as itself, into the metadata field of
    its name, every field of the struct is a param, and the profile lookup resets every
    impairment field before the table (a miss means no impairment)."""
    import re

    problems = []
    for file, action, struct, meta in (("profile.p4", "set_impairment", "impairment_t", "meta.imp"),
                                       ("radio.p4", "set_radio", "radio_params_t", "meta.rp")):
        params, body = _action_block(texts[file], action)
        fields = _struct_fields(texts["headers.p4"], struct)
        if sorted(params) != sorted(fields):
            problems.append(f"{action} params {sorted(set(params) ^ set(fields))} not both a param and a {struct} field")
        assigned = dict(re.findall(rf"{re.escape(meta)}\.(\w+)\s*=\s*([^;]+);", body))
        for p in params:
            if assigned.get(p, "").strip() != p:
                problems.append(f"{action}: {meta}.{p} = {assigned.get(p, '(nothing)')}, not the param {p}")
    apply = texts["profile.p4"].split("    apply {", 1)[1]
    reset = set(re.findall(r"meta\.imp\.(\w+)\s*=", apply.split("profile.apply()", 1)[0]))
    missing = [f for f in _struct_fields(texts["headers.p4"], "impairment_t") if f not in reset]
    if missing:
        problems.append(f"ProfileLookup does not reset meta.imp {missing} before the lookup")
    return problems


def _p4_texts(**overrides: tuple[str, str]) -> dict[str, str]:
    texts = {f: (P4_INCLUDE / f).read_text() for f in ("profile.p4", "radio.p4", "headers.p4")}
    for file, (old, new) in overrides.items():
        assert texts[file.replace("_", ".")].count(old) == 1, old
        texts[file.replace("_", ".")] = texts[file.replace("_", ".")].replace(old, new)
    return texts


def test_action_params_fill_their_metadata_fields():
    problems = metadata_assignment_problems(_p4_texts())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("file, old, new, named", [
    ("profile_p4", "meta.imp.loss_ecn = loss_ecn;", "meta.imp.loss_ecn = 0;", "loss_ecn"),
    ("profile_p4", "meta.imp.delay_ns = delay_ns;", "meta.imp.delay_ns = jitter_ns;", "delay_ns"),
    ("profile_p4", "        meta.imp.loss_ecn = 0;\n", "", "loss_ecn"),
    ("profile_p4", "meta.imp.cell_recip = cell_recip;", "meta.imp.cell_recip = cell_bytes;", "cell_recip"),
    ("radio_p4", "meta.rp.idle_to_dch_ns = idle_to_dch_ns;", "", "idle_to_dch_ns"),
    ("headers_p4", "    bit<1>        loss_ecn;\n", "", "loss_ecn"),
])
def test_metadata_assignment_mutation_is_caught(file, old, new, named):
    problems = metadata_assignment_problems(_p4_texts(**{file: (old, new)}))
    assert any(named in p for p in problems), problems
