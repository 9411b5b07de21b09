//! Lock modes, SQL Server's compatibility matrix and its conversions.
//!
//! Every data mode is described by its parts: a *range* part (key-range modes only: S, I
//! or X on the gap before a key) and the *grants* it holds on the resource itself (IS, IU,
//! IX, S, U, X). Two modes are compatible when their range parts are and every grant of
//! one is compatible with every grant of the other. That rule reproduces SQL Server's
//! published tables (the 6 x 6 table of the common modes and the key-range table; pinned
//! by the tests below) and extends them to the combined modes (SIU = S + IU, SIX = S + IX,
//! UIX = U + IX, RangeI-S = RangeI-N + S, ...) exactly as their names say. The schema
//! modes stand apart: Sch-S is compatible with everything but Sch-M, Sch-M with nothing,
//! BU with Sch-S and BU only.
//!
//! A *conversion* (a transaction that holds A on a resource and asks for B) is granted as
//! the weakest mode that conflicts with everything A or B conflicts with: S then IX gives
//! SIX, RangeI-N then RangeS-S gives RangeX-S, as SQL Server's conversion modes do.
//!
//! Invariants (asserted by the tests, computed at compile time):
//! 1. Compatibility is symmetric.
//! 2. `convert(a, b)` conflicts with a superset of what `a` and `b` conflict with, and
//!    `convert(a, a) == a`.

/// A lock mode, named as sys.dm_tran_locks.request_mode names it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockMode {
    SchS,
    SchM,
    S,
    U,
    X,
    IS,
    IU,
    IX,
    SIU,
    SIX,
    UIX,
    BU,
    RangeSS,
    RangeSU,
    RangeIN,
    RangeIS,
    RangeIU,
    RangeIX,
    RangeXS,
    RangeXU,
    RangeXX,
}

/// Every mode, weakest first within each family (the order ties of `convert` are broken by).
pub const ALL_MODES: [LockMode; 21] = [
    LockMode::SchS,
    LockMode::IS,
    LockMode::IU,
    LockMode::S,
    LockMode::IX,
    LockMode::U,
    LockMode::SIU,
    LockMode::SIX,
    LockMode::UIX,
    LockMode::X,
    LockMode::BU,
    LockMode::RangeIN,
    LockMode::RangeSS,
    LockMode::RangeSU,
    LockMode::RangeIS,
    LockMode::RangeIU,
    LockMode::RangeIX,
    LockMode::RangeXS,
    LockMode::RangeXU,
    LockMode::RangeXX,
    LockMode::SchM,
];

const MODE_COUNT: usize = ALL_MODES.len();

// Grant bits of the data modes.
const G_IS: u8 = 1;
const G_IU: u8 = 2;
const G_IX: u8 = 4;
const G_S: u8 = 8;
const G_U: u8 = 16;
const G_X: u8 = 32;

/// Which grants each grant is compatible with (the 6 x 6 part of SQL Server's table, with
/// IU: compatible with IS, IU, IX and S, not with U or X).
const fn grant_compatible(a: u8, b: u8) -> bool {
    let ok_with = match a {
        G_IS => G_IS | G_IU | G_IX | G_S | G_U,
        G_IU => G_IS | G_IU | G_IX | G_S,
        G_IX => G_IS | G_IU | G_IX,
        G_S => G_IS | G_IU | G_S | G_U,
        G_U => G_IS | G_S,
        _ => 0,
    };
    ok_with & b != 0
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Range {
    None,
    S,
    I,
    X,
}

const fn range_compatible(a: Range, b: Range) -> bool {
    matches!(
        (a, b),
        (Range::None, _) | (_, Range::None) | (Range::S, Range::S) | (Range::I, Range::I)
    )
}

/// The parts of a data mode; None for the schema modes and BU.
const fn parts(m: LockMode) -> Option<(Range, u8)> {
    use LockMode::*;
    Some(match m {
        S => (Range::None, G_S),
        U => (Range::None, G_U),
        X => (Range::None, G_X),
        IS => (Range::None, G_IS),
        IU => (Range::None, G_IU),
        IX => (Range::None, G_IX),
        SIU => (Range::None, G_S | G_IU),
        SIX => (Range::None, G_S | G_IX),
        UIX => (Range::None, G_U | G_IX),
        RangeSS => (Range::S, G_S),
        RangeSU => (Range::S, G_U),
        RangeIN => (Range::I, 0),
        RangeIS => (Range::I, G_S),
        RangeIU => (Range::I, G_U),
        RangeIX => (Range::I, G_X),
        RangeXS => (Range::X, G_S),
        RangeXU => (Range::X, G_U),
        RangeXX => (Range::X, G_X),
        SchS | SchM | BU => return None,
    })
}

const fn grants_compatible(a: u8, b: u8) -> bool {
    let mut i = 0;
    while i < 6 {
        let ga = 1u8 << i;
        let mut j = 0;
        while j < 6 {
            let gb = 1u8 << j;
            if a & ga != 0 && b & gb != 0 && !grant_compatible(ga, gb) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const fn compatible_by_rule(a: LockMode, b: LockMode) -> bool {
    use LockMode::*;
    match (a, b) {
        (SchM, _) | (_, SchM) => false,
        (SchS, _) | (_, SchS) => true,
        (BU, BU) => true,
        (BU, _) | (_, BU) => false,
        _ => match (parts(a), parts(b)) {
            (Some((ra, ga)), Some((rb, gb))) => {
                range_compatible(ra, rb) && grants_compatible(ga, gb)
            }
            _ => false,
        },
    }
}

/// Row `m` of the matrix: bit `n` set when mode `n` (by discriminant) is compatible with `m`.
const COMPATIBLE: [u32; MODE_COUNT] = {
    let mut table = [0u32; MODE_COUNT];
    let mut i = 0;
    while i < MODE_COUNT {
        let mut j = 0;
        while j < MODE_COUNT {
            if compatible_by_rule(ALL_MODES[i], ALL_MODES[j]) {
                table[ALL_MODES[i] as usize] |= 1 << (ALL_MODES[j] as u32);
            }
            j += 1;
        }
        i += 1;
    }
    table
};

/// The modes `m` conflicts with, as a bit set by discriminant.
const fn conflicts(m: LockMode) -> u32 {
    !COMPATIBLE[m as usize] & ((1u32 << MODE_COUNT) - 1)
}

/// `convert(a, b)` for every pair, computed once.
const CONVERT: [[LockMode; MODE_COUNT]; MODE_COUNT] = {
    let mut table = [[LockMode::SchS; MODE_COUNT]; MODE_COUNT];
    let mut i = 0;
    while i < MODE_COUNT {
        let mut j = 0;
        while j < MODE_COUNT {
            let (a, b) = (ALL_MODES[i], ALL_MODES[j]);
            table[a as usize][b as usize] = converted(a, b);
            j += 1;
        }
        i += 1;
    }
    table
};

const fn is_range(m: LockMode) -> bool {
    matches!(parts(m), Some((r, _)) if !matches!(r, Range::None))
}

/// What holding `a` and asking for `b` gives: `a` or `b` when one already conflicts with
/// everything the other does; else the mode with the fewest conflicts among those that
/// conflict with both, a key-range mode when either is one (RangeI-N then X is RangeI-X,
/// which conflicts exactly as X does).
const fn converted(a: LockMode, b: LockMode) -> LockMode {
    let need = conflicts(a) | conflicts(b);
    if need == conflicts(a) {
        return a;
    }
    if need == conflicts(b) && (!is_range(a) || is_range(b)) {
        return b;
    }
    let want_range = is_range(a) || is_range(b);
    let mut best = LockMode::SchM;
    let mut best_key = u32::MAX;
    let mut k = 0;
    while k < MODE_COUNT {
        let m = ALL_MODES[k];
        let c = conflicts(m);
        let key = c.count_ones() * 2 + (is_range(m) != want_range) as u32;
        if c & need == need && key < best_key {
            best = m;
            best_key = key;
        }
        k += 1;
    }
    best
}

impl LockMode {
    /// Whether a request for `self` can be granted beside a granted `other` of another
    /// transaction.
    #[inline]
    pub fn compatible(self, other: LockMode) -> bool {
        COMPATIBLE[self as usize] & (1 << other as u32) != 0
    }

    /// The mode a transaction holds after asking for `other` while holding `self`.
    #[inline]
    pub fn convert(self, other: LockMode) -> LockMode {
        CONVERT[self as usize][other as usize]
    }

    /// Whether holding `self` already gives everything a request for `other` would.
    #[inline]
    pub fn covers(self, other: LockMode) -> bool {
        self.convert(other) == self
    }

    /// The name sys.dm_tran_locks.request_mode shows.
    pub fn name(self) -> &'static str {
        use LockMode::*;
        match self {
            SchS => "Sch-S",
            SchM => "Sch-M",
            S => "S",
            U => "U",
            X => "X",
            IS => "IS",
            IU => "IU",
            IX => "IX",
            SIU => "SIU",
            SIX => "SIX",
            UIX => "UIX",
            BU => "BU",
            RangeSS => "RangeS-S",
            RangeSU => "RangeS-U",
            RangeIN => "RangeI-N",
            RangeIS => "RangeI-S",
            RangeIU => "RangeI-U",
            RangeIX => "RangeI-X",
            RangeXS => "RangeX-S",
            RangeXU => "RangeX-U",
            RangeXX => "RangeX-X",
        }
    }

    /// What a key-range mode locks on the key itself, as a table lock taken by escalation
    /// must cover it (a table S or X leaves no other transaction an intent lock to insert
    /// under, so it covers the ranges too): RangeS-S is S, RangeS-U is U, the RangeI and
    /// RangeX modes X. Any other mode is itself.
    pub fn key_part(self) -> LockMode {
        use LockMode::*;
        match self {
            RangeSS => S,
            RangeSU => U,
            RangeIN | RangeIS | RangeIU | RangeIX | RangeXS | RangeXU | RangeXX => X,
            m => m,
        }
    }

    /// The intent mode a parent resource (the table, the page) needs for a lock in `self`
    /// below it: IS for reads, IU for update locks, IX for writes.
    pub fn intent(self) -> LockMode {
        use LockMode::*;
        match self {
            S | IS | RangeSS => IS,
            U | IU | RangeSU => IU,
            SIU => SIU,
            SchS => SchS,
            SchM => SchM,
            BU => BU,
            _ => IX,
        }
    }

    /// The wait type a request for this mode waits as (sys.dm_os_wait_stats): LCK_M_S, ...
    pub fn wait_type(self) -> &'static str {
        use LockMode::*;
        match self {
            SchS => "LCK_M_SCH_S",
            SchM => "LCK_M_SCH_M",
            S => "LCK_M_S",
            U => "LCK_M_U",
            X => "LCK_M_X",
            IS => "LCK_M_IS",
            IU => "LCK_M_IU",
            IX => "LCK_M_IX",
            SIU => "LCK_M_SIU",
            SIX => "LCK_M_SIX",
            UIX => "LCK_M_UIX",
            BU => "LCK_M_BU",
            RangeSS => "LCK_M_RS_S",
            RangeSU => "LCK_M_RS_U",
            RangeIN => "LCK_M_RIn_NL",
            RangeIS => "LCK_M_RIn_S",
            RangeIU => "LCK_M_RIn_U",
            RangeIX => "LCK_M_RIn_X",
            RangeXS => "LCK_M_RX_S",
            RangeXU => "LCK_M_RX_U",
            RangeXX => "LCK_M_RX_X",
        }
    }
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::LockMode::*;
    use super::*;

    fn table_says(rows: &[LockMode], cols: &[LockMode], yes: &[&str]) {
        for (r, line) in rows.iter().zip(yes) {
            let cells: Vec<&str> = line.split_whitespace().collect();
            for (c, cell) in cols.iter().zip(cells) {
                assert_eq!(r.compatible(*c), cell == "Y", "{r} requested, {c} granted");
            }
        }
    }

    /// The published table of the most common modes (requested rows, granted columns).
    #[test]
    fn common_modes_match_sql_servers_table() {
        let modes = [IS, S, U, IX, SIX, X];
        table_says(
            &modes,
            &modes,
            &[
                "Y Y Y Y Y N",
                "Y Y Y N N N",
                "Y Y N N N N",
                "Y N N Y N N",
                "Y N N N N N",
                "N N N N N N",
            ],
        );
    }

    /// The published key-range table (requested rows, granted columns S U X RangeS-S
    /// RangeS-U RangeI-N RangeX-X).
    #[test]
    fn key_range_modes_match_sql_servers_table() {
        let cols = [S, U, X, RangeSS, RangeSU, RangeIN, RangeXX];
        table_says(
            &[RangeSS, RangeSU, RangeIN, RangeXX],
            &cols,
            &[
                "Y Y N Y Y N N",
                "Y N N Y N N N",
                "Y Y Y N N Y N",
                "N N N N N N N",
            ],
        );
    }

    #[test]
    fn schema_and_bulk_modes() {
        for m in ALL_MODES {
            assert_eq!(SchS.compatible(m), m != SchM, "Sch-S with {m}");
            assert!(!SchM.compatible(m), "Sch-M with {m}");
            assert_eq!(BU.compatible(m), m == BU || m == SchS, "BU with {m}");
        }
    }

    #[test]
    fn compatibility_is_symmetric() {
        for a in ALL_MODES {
            for b in ALL_MODES {
                assert_eq!(a.compatible(b), b.compatible(a), "{a} / {b}");
            }
        }
    }

    /// SQL Server's conversion modes: what a transaction ends up holding.
    #[test]
    fn conversions_give_sql_servers_combined_modes() {
        let cases = [
            (S, IX, SIX),
            (IX, S, SIX),
            (U, IX, UIX),
            (S, IU, SIU),
            (IS, S, S),
            (S, U, U),
            (U, X, X),
            (IS, IX, IX),
            (SIX, X, X),
            (RangeIN, S, RangeIS),
            (RangeIN, U, RangeIU),
            (RangeIN, X, RangeIX),
            (RangeIN, RangeSS, RangeXS),
            (RangeIN, RangeSU, RangeXU),
            (SchS, IS, IS),
            (SchM, S, SchM),
            (X, SchS, X),
        ];
        for (held, asked, got) in cases {
            assert_eq!(held.convert(asked), got, "{held} then {asked}");
        }
    }

    #[test]
    fn conversion_covers_both_and_is_idempotent() {
        for a in ALL_MODES {
            assert_eq!(a.convert(a), a);
            for b in ALL_MODES {
                let c = a.convert(b);
                assert_eq!(conflicts(c) & conflicts(a), conflicts(a), "{a}+{b}={c}");
                assert_eq!(conflicts(c) & conflicts(b), conflicts(b), "{a}+{b}={c}");
            }
        }
    }

    #[test]
    fn every_mode_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for m in ALL_MODES {
            assert!(seen.insert(m as u8));
        }
        assert_eq!(seen.len(), MODE_COUNT);
        const { assert!(MODE_COUNT <= 32, "bit sets are u32") };
    }
}
