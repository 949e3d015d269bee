//! What is left of a span of time: the one check behind every deadline in
//! the host that counts down from a span (a run's CPU budget, the
//! admission quantum, the idle spells after which memory is returned and a
//! grown reserve shrinks).

use std::time::Duration;

/// What is left of `span` after `elapsed`, if anything (none once it is
/// all spent, exactly spent included).
pub fn left_of(span: Duration, elapsed: Duration) -> Option<Duration> {
  span.checked_sub(elapsed).filter(|left| !left.is_zero())
}
