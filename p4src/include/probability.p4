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

#endif
