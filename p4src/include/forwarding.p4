/*
 * p4netem: forwarding stage (contract tables port_map, l2_fwd, l2_learn).
 *
 * The stage only records its decision in meta.out_port / meta.no_route; ingress
 * applies it after classification, so that a "no route" drop is still counted
 * against the packet's profile.
 *
 * Every control-plane object carries an absolute @name (leading dot): this control
 * is instantiated inside P4netemIngress, and the contract names the objects
 * P4netemIngress.<name>, not P4netemIngress.<instance>.<name>.
 */
#ifndef P4NETEM_FORWARDING_P4
#define P4NETEM_FORWARDING_P4

control Forwarding(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    @name(".P4netemIngress.set_egress_port")
    @id(0x01000001)
    action set_egress_port(port_t port) {
        meta.out_port = port;
        meta.no_route = 0;
    }

    @name(".P4netemIngress.send_to_cpu")
    @id(0x01000002)
    action send_to_cpu() {
        meta.out_port = CPU_PORT;
        meta.no_route = 0;
    }

    @name(".P4netemIngress.drop_packet")
    @id(0x01000003)
    action drop_packet() {
        meta.no_route = 1;
    }

    /* Learning reports the (source MAC, port) pair of frames whose source is not yet
     * known; entries (known MACs) run NoAction, so learn is only a default. */
    @name(".P4netemIngress.learn")
    @id(0x01000004)
    action learn() {
        digest<mac_learn_digest_t>(MAC_LEARN_RECEIVER,
                                   { hdr.ethernet.src_addr, standard_metadata.ingress_port });
        meta.digest_used = 1;
    }

    @name(".P4netemIngress.port_map")
    @id(0x02000001)
    table port_map {
        key = {
            standard_metadata.ingress_port : exact;
        }
        actions = {
            set_egress_port;
            send_to_cpu;
            drop_packet;
        }
        default_action = drop_packet();
        size = PORT_MAP_SIZE;
    }

    /* A miss falls back to port_map; NoAction therefore only makes sense as the miss. */
    @name(".P4netemIngress.l2_fwd")
    @id(0x02000002)
    table l2_fwd {
        key = {
            hdr.ethernet.dst_addr : exact;
        }
        actions = {
            set_egress_port;
            send_to_cpu;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = L2_FWD_SIZE;
    }

    /* Learning is off until the controller sets the default action to learn. */
    @name(".P4netemIngress.l2_learn")
    @id(0x02000003)
    table l2_learn {
        key = {
            hdr.ethernet.src_addr : exact;
        }
        actions = {
            NoAction;
            @defaultonly learn;
        }
        default_action = NoAction();
        size = L2_LEARN_SIZE;
    }

    apply {
        meta.out_port = 0;
        meta.no_route = 1;
        /* Malformed frames are forwarded by port_map alone (contract), and without a
         * valid Ethernet header the L2 keys would be undefined. */
        bool l2_usable = hdr.ethernet.isValid() && standard_metadata.parser_error == error.NoError;
        bool l2_hit = false;
        if (l2_usable) {
            l2_learn.apply();
            if (l2_fwd.apply().hit) {
                l2_hit = true;
            }
        }
        if (!l2_hit) {
            port_map.apply();
        }
    }
}

#endif
