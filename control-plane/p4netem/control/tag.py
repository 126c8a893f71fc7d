"""The cookie the controller stores in each classifier entry it writes (`controller_metadata`).

The switch holds no names, so the controller keeps what it needs to read its configuration back
in the 64-bit cookie of its two classifier entries per rule; any other controller's entries carry
a cookie without the magic byte (usually 0) and are left alone ("unmanaged"):

    bits 63..56  0x9E             magic: written by p4netem.control, layout version 1
    bits 55..44  rule number      1..4095, groups the uplink and downlink entries of a rule
    bits 43..32  spare profile id the rule's second profile id (the atomic switch flips between two)
    bits 31..0   crc32(name)      the name of the profile last applied, to show it by name
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

MAGIC = 0x9E
MAX_RULE = 0xFFF
MAX_PROFILE_ID = 0xFFF


def name_crc(name: str) -> int:
    return zlib.crc32(name.encode("utf-8")) & 0xFFFFFFFF


@dataclass(frozen=True)
class EntryTag:
    rule: int
    spare_id: int
    profile_crc: int

    def encode(self) -> int:
        if not 1 <= self.rule <= MAX_RULE:
            raise ValueError(f"rule number {self.rule} outside 1..{MAX_RULE}")
        if not 0 <= self.spare_id <= MAX_PROFILE_ID:
            raise ValueError(f"profile id {self.spare_id} outside 0..{MAX_PROFILE_ID}")
        return (MAGIC << 56) | (self.rule << 44) | (self.spare_id << 32) | (self.profile_crc & 0xFFFFFFFF)

    @classmethod
    def decode(cls, value: int) -> EntryTag | None:
        """The tag of a cookie, or None when the entry was not written by this controller."""
        if value >> 56 != MAGIC:
            return None
        rule = (value >> 44) & MAX_RULE
        if rule == 0:
            return None
        return cls(rule=rule, spare_id=(value >> 32) & MAX_PROFILE_ID, profile_crc=value & 0xFFFFFFFF)
