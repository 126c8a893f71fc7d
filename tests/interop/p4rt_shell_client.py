"""Drives p4netem-switch with p4runtime-shell, a third-party P4Runtime client.

Runs under .venv-p4rt-shell's interpreter (p4runtime-shell pins an old protobuf), started as a
subprocess by test_p4runtime_shell.py, which asserts on the lines printed here. Uses the shell's own
public entry points (setup, TableEntry, teardown) the way a user at its prompt would, so the test
covers what a p4runtime-shell user meets: SetForwardingPipelineConfig(VERIFY_AND_COMMIT) with a P4Info
text file and a device-config blob, GetForwardingPipelineConfig(P4INFO_AND_COOKIE), Write and Read.

usage: p4rt_shell_client.py GRPC_ADDR DEVICE_ID P4INFO_TXTPB DEVICE_CONFIG IN_PORT OUT_PORT
"""
import sys

import p4runtime_sh.shell as sh
from p4runtime_sh.context import P4Type
from p4runtime_sh.p4runtime import P4RuntimeWriteException

TABLE = "P4netemIngress.port_map"
KEY = "standard_metadata.ingress_port"
ACTION = "P4netemIngress.set_egress_port"


def main() -> None:
    addr, device_id, p4info, device_config, in_port, out_port = sys.argv[1:7]
    sh.setup(device_id=int(device_id), grpc_addr=addr, election_id=(0, 1),
             config=sh.FwdPipeConfig(p4info, device_config), verbose=False)
    try:
        # What the server returned from GetForwardingPipelineConfig (setup() reads it back).
        for name, obj in sorted(sh.context.get_objs(P4Type.table)):
            print(f"TABLE {name} id=0x{obj.preamble.id:08x} size={obj.size}", flush=True)

        te = sh.TableEntry(TABLE)(action=ACTION)
        te.match[KEY] = in_port
        te.action["port"] = out_port
        te.insert()
        print("INSERTED", flush=True)

        try:
            te.insert()
            print("DUPLICATE_ACCEPTED", flush=True)
        except P4RuntimeWriteException as e:
            # The error text carries the per-update status code name (e.g. ALREADY_EXISTS).
            print("DUPLICATE_REJECTED", " ".join(str(e).split()), flush=True)

        for entry in sh.TableEntry(TABLE).read():
            msg = entry.msg()  # the shell rebuilds the p4.v1.TableEntry from what the server sent
            keys = {sh.context.get_mf_name(TABLE, m.field_id): int.from_bytes(m.exact.value, "big")
                    for m in msg.match}
            act = msg.action.action
            params = {sh.context.get_param_name(ACTION, p.param_id): int.from_bytes(p.value, "big")
                      for p in act.params}
            print(f"ENTRY {sh.context.get_name_from_id(msg.table_id)} "
                  f"{KEY}={keys.get(KEY)} action={sh.context.get_name_from_id(act.action_id)} "
                  f"port={params.get('port')}", flush=True)

        te.delete()
        remaining = sum(1 for _ in sh.TableEntry(TABLE).read())
        print(f"AFTER_DELETE {remaining}", flush=True)
    finally:
        sh.teardown()


if __name__ == "__main__":
    main()
