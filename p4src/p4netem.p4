/*
 * p4netem: the network-emulator pipeline, P4-16 for the v1model architecture.
 *
 * This program and p4netem.p4info.txtpb are the control-plane contract of every
 * p4netem target (docs/pipeline-contract.md); docs/p4-pipeline.md explains the
 * structure and how to run it on bmv2.
 *
 *   p4c-bm2-ss --arch v1model --p4runtime-files p4netem.p4info.txtpb \
 *              -o p4netem.json p4netem.p4
 */
#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/checksums.p4"
#include "include/probability.p4"
#include "include/ecn.p4"
#include "include/exp2.p4"
#include "include/forwarding.p4"
#include "include/classifier.p4"
#include "include/profile.p4"
#include "include/radio.p4"
#include "include/onoff.p4"
#include "include/loss.p4"
#include "include/duplication.p4"
#include "include/corruption.p4"
#include "include/codel.p4"
#include "include/red.p4"
#include "include/pie.p4"
#include "include/trace.p4"
#include "include/bearer.p4"
#include "include/rate.p4"
#include "include/slot.p4"
#include "include/delay.p4"
#include "include/ingress.p4"
#include "include/egress.p4"

V1Switch(P4netemParser(),
         P4netemVerifyChecksum(),
         P4netemIngress(),
         P4netemEgress(),
         P4netemComputeChecksum(),
         P4netemDeparser()) main;
