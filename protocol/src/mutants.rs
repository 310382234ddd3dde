//! Deliberate bugs ("mutants"), for tests that show a broken rule is caught: the switches of
//! [`crate::ExecutorMutations`], [`crate::CoordinatorMutations`], [`crate::RecoveryMutations`]
//! and [`crate::failover::FailoverMutations`], and how the code reads them.
//!
//! The switches exist only in a build with this crate's `mutants` feature (the tests of the
//! crates that use them turn it on). Without it, each `*Mutations` struct is still a type, with
//! no fields (so options and builders holding one compile either way), and every site that
//! reads a switch reads `false`: a plain build of this crate has no branch for these bugs (the
//! data path's and the membership's own test setters, in their crates, stay compiled in).

/// Declares a `*Mutations` struct: with the `mutants` feature, with its fields (each a
/// deliberate bug's switch, off by default); without it, the same type with no fields.
macro_rules! mutations {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[cfg(feature = "mutants")]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        $(#[$meta])*
        #[cfg(not(feature = "mutants"))]
        pub struct $name {}
    };
}

/// Reads a deliberate bug's switch: `mutant!(self.mutations.late_phase1_takes_locks)` is the
/// expression (a `bool`) with the `mutants` feature, and `false` without it, where the
/// expression is not compiled at all.
#[cfg(feature = "mutants")]
macro_rules! mutant {
    ($switch:expr) => {
        $switch
    };
}

/// Reads a deliberate bug's switch: `false`, as every switch is without the `mutants` feature
/// (the expression naming it is not compiled).
#[cfg(not(feature = "mutants"))]
macro_rules! mutant {
    ($switch:expr) => {
        false
    };
}
