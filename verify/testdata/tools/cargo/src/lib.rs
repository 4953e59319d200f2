//! Fixture crate for verify/testdata/gen.sh: what libtest's JUnit output says about each outcome.

/// Adds two numbers.
///
/// ```
/// assert_eq!(sample::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

/// A change that does not compile: `cargo test` builds nothing and runs no test.
#[cfg(feature = "compile_error")]
pub fn sub(a: i32, b: i32) -> i32 {
    a - c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 2), 4);
    }

    #[test]
    #[ignore = "needs a database"]
    fn queries() {
        panic!("not reached");
    }

    #[test]
    #[cfg(feature = "fail")]
    fn divides() {
        assert_eq!(7 / 2, 4, "integer division");
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn overflows() {
        panic!("overflow");
    }
}
