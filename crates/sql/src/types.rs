//! SQL types and values: what a column, a variable or an expression holds.
//!
//! One representation per value kind, shared by the parser (literals), the executor
//! (expressions, variables, system views), the renderer (sqlcmd-style text) and, later,
//! the TDS encoder and the record format.
//!
//! Invariants:
//! 1. A `Value` never carries its declared length; the `SqlType` beside it does.
//! 2. Date and time values are counts from SQL Server's own epochs, so conversion between
//!    `DATETIME` and `DATETIME2` is arithmetic, never string round-trips.

/// The maximum length marker for `VARCHAR(MAX)`, `NVARCHAR(MAX)` and `VARBINARY(MAX)`.
pub const MAX_LENGTH: u32 = u32::MAX;

/// A T-SQL data type as declared (`NVARCHAR(128)`, `DECIMAL(18, 2)`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SqlType {
    Bit,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    /// `DECIMAL(p, s)` and `NUMERIC(p, s)`.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// `FLOAT` (8 bytes).
    Float,
    /// `REAL` (4 bytes).
    Real,
    /// `CHAR(n)`, bytes.
    Char(u32),
    /// `VARCHAR(n)`, bytes; `MAX_LENGTH` for `MAX`.
    VarChar(u32),
    /// `NCHAR(n)`, characters.
    NChar(u32),
    /// `NVARCHAR(n)`, characters; `MAX_LENGTH` for `MAX`.
    NVarChar(u32),
    Binary(u32),
    VarBinary(u32),
    Date,
    DateTime,
    /// `DATETIME2(scale)`, scale 0..=7.
    DateTime2(u8),
    UniqueIdentifier,
}

/// One value. `Null` is typeless; the column or variable type says what it would be.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bit(bool),
    TinyInt(u8),
    SmallInt(i16),
    Int(i32),
    BigInt(i64),
    /// The unscaled integer and the scale: `Decimal { unscaled: 12345, scale: 2 }` is 123.45.
    Decimal {
        unscaled: i128,
        scale: u8,
    },
    Float(f64),
    Real(f32),
    /// Text of every character type (`CHAR`, `VARCHAR`, `NCHAR`, `NVARCHAR`).
    Text(String),
    Binary(Vec<u8>),
    /// Days since 0001-01-01.
    Date(i32),
    /// 100-nanosecond ticks since 0001-01-01 00:00:00. `DATETIME` values are stored the same
    /// way after rounding to SQL Server's 1/300-second precision.
    DateTime(i64),
    /// 100-nanosecond ticks since 0001-01-01 00:00:00.
    DateTime2(i64),
    Guid([u8; 16]),
}

/// 100-nanosecond ticks in one day.
pub const TICKS_PER_DAY: i64 = 864_000_000_000;
/// 100-nanosecond ticks in one second.
pub const TICKS_PER_SECOND: i64 = 10_000_000;

impl Value {
    /// True for `Value::Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl SqlType {
    /// True for the exact and approximate numeric types (and bit).
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            SqlType::Bit
                | SqlType::TinyInt
                | SqlType::SmallInt
                | SqlType::Int
                | SqlType::BigInt
                | SqlType::Decimal { .. }
                | SqlType::Float
                | SqlType::Real
        )
    }

    /// True for the character types.
    pub fn is_text(self) -> bool {
        matches!(
            self,
            SqlType::Char(_) | SqlType::VarChar(_) | SqlType::NChar(_) | SqlType::NVarChar(_)
        )
    }
}
