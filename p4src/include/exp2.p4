/*
 * p4netem: a * 2^-x in fixed point, without division or floating point (v1model has neither).
 * Shared by the PF bearers' decaying average (bearer.p4) and the on/off link (loss.p4).
 *
 * x = halvings + f, f a fraction of one in Q56 (f56 < 2^56). Whole halvings shift; f splits
 * into its top 8 bits k, factor 2^(-k/256) (the product of EXP2_Q32_j over k's set bits, high
 * bit first, each truncated to Q32), and the rest r < 1/256, factor 1 - r ln 2 (the tangent:
 * exact to first order, so many small steps compound to the true exponential; its error is at
 * most (r ln 2)^2 / 2 < 3.7e-6). Both products round to nearest, so x = 0 gives a back.
 * p4netem-switch computes the same bits (dataplane/src/exp2.rs, with the 256 products in a
 * table); tests/contract checks the constants and the arithmetic on the switch's vectors.
 */
#ifndef P4NETEM_EXP2_P4
#define P4NETEM_EXP2_P4

/* 2^(-2^j/256) in Q32, j = 0..7, and ln 2 in Q32 (EXP2_BITS_Q32 and EXP2_LN2_Q32 of
 * dataplane/src/exp2.rs; tests/contract checks both lists against the exact values). */
#define EXP2_Q32_0  4283353945
#define EXP2_Q32_1  4271771996
#define EXP2_Q32_2  4248701965
#define EXP2_Q32_3  4202935003
#define EXP2_Q32_4  4112874773
#define EXP2_Q32_5  3938502376
#define EXP2_Q32_6  3611622603
#define EXP2_Q32_7  3037000500
#define EXP2_LN2_Q32 2977044472

control Exp2Neg(in bit<64> a, in bit<64> halvings, in bit<64> f56, out bit<64> y) {
    apply {
        if (halvings >= 64) {
            y = 0;
        } else {
            bit<64> s = a >> (bit<8>)halvings;
            bit<8> k = (bit<8>)(f56 >> 48);
            bit<128> r = (bit<128>)(f56 & 0xFFFFFFFFFFFF);
            bit<128> t = 1 << 32;
            if (k[7:7] == 1) { t = (t * EXP2_Q32_7) >> 32; }
            if (k[6:6] == 1) { t = (t * EXP2_Q32_6) >> 32; }
            if (k[5:5] == 1) { t = (t * EXP2_Q32_5) >> 32; }
            if (k[4:4] == 1) { t = (t * EXP2_Q32_4) >> 32; }
            if (k[3:3] == 1) { t = (t * EXP2_Q32_3) >> 32; }
            if (k[2:2] == 1) { t = (t * EXP2_Q32_2) >> 32; }
            if (k[1:1] == 1) { t = (t * EXP2_Q32_1) >> 32; }
            if (k[0:0] == 1) { t = (t * EXP2_Q32_0) >> 32; }
            bit<128> x = ((bit<128>)s * t + (1 << 31)) >> 32;
            /* r ln 2 in Q48 (r is Q56, ln 2 Q32: the product is Q88) */
            bit<128> d = (EXP2_LN2_Q32 * r) >> 40;
            y = (bit<64>)(x - ((x * d + (1 << 47)) >> 48));
        }
    }
}

#endif
