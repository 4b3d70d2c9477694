// SPDX-License-Identifier: MIT OR Apache-2.0
//! The log reader's rule table: each kind of damage it can meet, and what it does with it
//! under each [`ReadMode`](super::ReadMode). The reader classifies what it finds; this table
//! alone decides.

/// A kind of damage the reader meets. The first three are found in a physical record's header
/// and payload, before anything of it is used; an unknown type in a fragment whose checksum
/// matched (or, while searching, in any header); the last three in how fragments follow one
/// another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Damage {
    /// A length that runs past the end of the file.
    CutOff,
    /// A length that runs past the end of its block, with more of the file after the block.
    BadLength,
    /// A checksum that does not match the type and payload.
    BadChecksum,
    /// A type byte no writer writes.
    UnknownType,
    /// A first fragment, or some more, followed by a new record instead of its last fragment.
    PartialRecord,
    /// A middle or last fragment with no first fragment before it.
    MissingStart,
    /// A fragmented record interrupted by damage or by padding.
    BrokenRecord,
}

/// The rules the reader judges damage by: its [`ReadMode`](super::ReadMode), with recovery
/// split in two by whether damage was already met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rules {
    Strict,
    Tolerant,
    /// Recovery before any damage.
    Recovery,
    /// Recovery after damage: searching, byte by byte, for a readable record after it.
    Searching,
}

/// What the reader does with one piece of damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Return it as a corruption error.
    Fail,
    /// Record it, with the bytes it cost, in [`LogReader::corruptions`](super::LogReader::corruptions), and go on after it.
    Skip,
    /// Keep it (the first only) as pending damage and search on for a readable record: one
    /// makes it corruption, none makes it a torn tail.
    Resync,
    /// No damage, only no record here: the search goes on at the next byte.
    Step,
    /// The end of the log: a write torn by a crash.
    End,
}

impl Damage {
    /// The rule table: what to do with this damage under `rules`.
    ///
    /// | damage                          | strict | tolerant | recovery | searching |
    /// |---------------------------------|--------|----------|----------|-----------|
    /// | cut off by the end of the file  | End    | End      | Resync   | Step      |
    /// | bad length, bad checksum        | Fail   | Skip     | Resync   | Step      |
    /// | unknown type                    | Fail   | Skip     | Resync   | Step      |
    /// | fragments out of order          | Fail   | Skip     | Resync   | Resync    |
    ///
    /// Fragments out of order are never met while searching (a readable fragment ends the
    /// search as corruption first); `Resync` there keeps the first damage.
    pub(super) fn action(self, rules: Rules) -> Action {
        match (self, rules) {
            (Damage::CutOff, Rules::Strict | Rules::Tolerant) => Action::End,
            (Damage::CutOff | Damage::BadLength | Damage::BadChecksum, Rules::Searching) => {
                Action::Step
            }
            (Damage::UnknownType, Rules::Searching) => Action::Step,
            (_, Rules::Strict) => Action::Fail,
            (_, Rules::Tolerant) => Action::Skip,
            (_, Rules::Recovery | Rules::Searching) => Action::Resync,
        }
    }

    /// Whether it is found in a header, so that the bytes after it cannot be trusted as far
    /// as the header's length says.
    pub(super) fn in_header(self) -> bool {
        matches!(
            self,
            Damage::CutOff | Damage::BadLength | Damage::BadChecksum
        )
    }

    /// The reason a [`LogCorruption`] or an error gives.
    pub(super) fn reason(self) -> &'static str {
        match self {
            Damage::CutOff => "record cut off by the end of the file",
            Damage::BadLength => "bad record length",
            Damage::BadChecksum => "checksum mismatch",
            Damage::UnknownType => "unknown record type",
            Damage::PartialRecord => "partial record without end",
            Damage::MissingStart => "missing start of fragmented record",
            Damage::BrokenRecord => "error in middle of record",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_DAMAGE: [Damage; 7] = [
        Damage::CutOff,
        Damage::BadLength,
        Damage::BadChecksum,
        Damage::UnknownType,
        Damage::PartialRecord,
        Damage::MissingStart,
        Damage::BrokenRecord,
    ];

    /// The table in [`Damage::action`]'s documentation, row by row.
    #[test]
    fn the_rule_table_gives_the_documented_action_for_each_damage_in_each_mode() {
        use Action::*;
        use Rules::*;
        let rules = [Strict, Tolerant, Recovery, Searching];
        let table: [(Damage, [Action; 4]); 7] = [
            (Damage::CutOff, [End, End, Resync, Step]),
            (Damage::BadLength, [Fail, Skip, Resync, Step]),
            (Damage::BadChecksum, [Fail, Skip, Resync, Step]),
            (Damage::UnknownType, [Fail, Skip, Resync, Step]),
            (Damage::PartialRecord, [Fail, Skip, Resync, Resync]),
            (Damage::MissingStart, [Fail, Skip, Resync, Resync]),
            (Damage::BrokenRecord, [Fail, Skip, Resync, Resync]),
        ];
        assert_eq!(table.map(|(damage, _)| damage), ALL_DAMAGE);
        for (damage, actions) in table {
            for (rules, want) in rules.into_iter().zip(actions) {
                assert_eq!(damage.action(rules), want, "{damage:?} under {rules:?}");
            }
        }
    }

    #[test]
    fn only_header_damage_ends_the_log_or_steps_over_a_byte() {
        // The reader moves past a header itself; damage found in whole fragments has been
        // consumed already, so its rule must not ask for either.
        for damage in ALL_DAMAGE {
            for rules in [
                Rules::Strict,
                Rules::Tolerant,
                Rules::Recovery,
                Rules::Searching,
            ] {
                let action = damage.action(rules);
                if matches!(action, Action::End | Action::Step) {
                    assert!(
                        damage.in_header() || damage == Damage::UnknownType,
                        "{damage:?} under {rules:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_damage_has_its_own_reason() {
        let reasons = ALL_DAMAGE.map(Damage::reason);
        for (i, a) in reasons.iter().enumerate() {
            assert!(!reasons[i + 1..].contains(a), "{a}");
        }
    }
}
