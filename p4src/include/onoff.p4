/*
 * p4netem: the on/off link (contract stage 3, before the loss models), Mahimahi's mm-onoff.
 *
 * The link alternates between on and off, each period exponentially distributed with mean
 * mean_on or mean_off; while it is off, every packet is dropped (reason link_off). That is a
 * two-state continuous-time Markov chain (on -> off at rate 1/mean_on, off -> on at rate
 * 1/mean_off), and a packet only needs the state at its own arrival: given the state s that
 * the pd's previous packet saw dt ns earlier, the link is on with probability
 *
 *     P(on) = pi + ([s is on] - pi) * e^(-dt / tau),
 *     pi = mean_on / (mean_on + mean_off),  tau = mean_on * mean_off / (mean_on + mean_off).
 *
 * The chain is memoryless, so one draw per packet samples it exactly at the arrivals: no
 * timer, and no loop over the periods that passed between two packets (v1model has neither).
 * The controller gives pi in Q32 (onoff_on_prob) and 2^64 / (tau ln 2) (onoff_recip: the
 * half-lives of e^(-dt / tau) per ns, Q64; 0: no on/off link, every packet passes). Then
 * e^(-dt / tau) = 2^-(dt * onoff_recip / 2^64), from Exp2Neg (exp2.p4) in Q32.
 * The chain starts on at the pd's first packet: onoff_state 0 (never written) reads as on
 * with dt = 0. p4netem-switch computes the same bits (dataplane/src/stage/onoff.rs).
 */
#ifndef P4NETEM_ONOFF_P4
#define P4NETEM_ONOFF_P4

control OnOffLink(inout metadata_t meta, in time_ns_t now, out bool off) {

    /* ONOFF_ON or ONOFF_OFF as the pd's last packet saw the link; 0 not started (on). */
    @name(".P4netemIngress.onoff_state")
    @id(0x16000056)
    register<bit<8>>(PD_COUNT) onoff_state;

    /* When the pd's last packet saw it (ns). */
    @name(".P4netemIngress.onoff_at_ns")
    @id(0x16000057)
    register<bit<64>>(PD_COUNT) onoff_at_ns;

    Exp2Neg() exp2neg;

    apply {
        bit<8> st;
        time_ns_t at;
        onoff_state.read(st, meta.pd);
        onoff_at_ns.read(at, meta.pd);
        time_ns_t dt = 0;
        if (st != 0 && now > at) {
            dt = now - at;
        }
        /* dt * onoff_recip: half-lives of e^(-dt / tau), whole ones above bit 64, the fraction
         * below (Exp2Neg takes it in Q56). */
        bit<128> y = (bit<128>)dt * (bit<128>)meta.imp.onoff_recip;
        bit<64> e;
        exp2neg.apply(1 << 32, (bit<64>)(y >> 64), ((bit<64>)y) >> 8, e);
        bit<128> pi = (bit<128>)meta.imp.onoff_on_prob;
        bit<128> p;
        if (st == ONOFF_OFF) {
            p = pi - ((pi * (bit<128>)e) >> 32);
        } else {
            p = pi + ((((1 << 32) - pi) * (bit<128>)e) >> 32);
        }
        bit<32> draw;
        random<bit<32>>(draw, 0, 0xFFFFFFFF);
        off = (bit<128>)draw >= p;
        if (off) {
            onoff_state.write(meta.pd, ONOFF_OFF);
        } else {
            onoff_state.write(meta.pd, ONOFF_ON);
        }
        onoff_at_ns.write(meta.pd, now);
    }
}

#endif
