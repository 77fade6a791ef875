//! CEL over `object`: the [`Filter`] predicate, the [`ChangePredicate`] of watches and the
//! [`StringsExpr`] index key extractor.
//!
//! Compiling (`compile`) finds what an expression reads of `object` (`access`), so that
//! evaluating converts only those fields into CEL values (`value`); `samples` checks the type of
//! the result at compile time.

mod access;
mod compile;
mod filter;
mod guards;
mod predicate;
mod samples;
mod strings;
mod value;

pub use filter::Filter;
pub use guards::unguarded_reads;
pub use predicate::ChangePredicate;
pub use strings::StringsExpr;

/// The one variable expressions see.
const OBJECT: &str = "object";
/// The previous state of the object, in [`ChangePredicate`]s.
const OLD_OBJECT: &str = "oldObject";

/// The CEL type of a value, for messages.
fn type_name(value: &cel::Value) -> String {
    value.type_of().to_string()
}

#[cfg(test)]
mod tests;
