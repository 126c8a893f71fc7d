/*
 * p4netem: Bernoulli trials.
 *
 * Probabilities are fractions of 2^32 (contract). A uniform 32-bit draw r hits
 * when r < p, which makes p = 0 "never"; the one value that comparison cannot
 * reach, 0xFFFFFFFF, is defined as "always".
 */
#ifndef P4NETEM_PROBABILITY_P4
#define P4NETEM_PROBABILITY_P4

bool chance(in bit<32> draw, in prob_t p) {
    return p == PROB_ALWAYS || draw < p;
}

/*
 * netem's correlated random numbers (Linux sch_netem get_crandom; contract "Correlation").
 * With rho = corr + 1 (corr: the tc percentage as a fraction of 2^32, like every prob_t),
 *     answer = (value * (2^32 - rho) + last * rho) >> 32,   then last = answer,
 * value a fresh uniform 32-bit draw. Each (profile, direction) keeps one `last` per use in
 * a bit<33> register cell whose bit 32 says it holds a number: a cell never drawn (0, as
 * after a reset) starts from `fresh`, a second uniform draw, as netem seeds `last` with a
 * random number when the qdisc is configured. The sum stays below 2^64: both products are
 * at most (2^32 - 1) times their weights, which add up to 2^32. Returns the new cell; its
 * low 32 bits are the answer. A stage with corr 0 draws independently and never calls this.
 */
bit<33> corr_next(in bit<32> value, in bit<32> fresh, in bit<33> cell, in prob_t corr) {
    bit<64> last = (bit<64>)cell[31:0];
    if (cell[32:32] == 0) {
        last = (bit<64>)fresh;
    }
    bit<64> rho = (bit<64>)corr + 1;
    bit<64> answer = ((bit<64>)value * ((64w1 << 32) - rho) + last * rho) >> 32;
    return 1w1 ++ answer[31:0];
}

#endif
