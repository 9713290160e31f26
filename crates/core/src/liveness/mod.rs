//! Job liveness, pure: Spike #34 retry decisions (`retry`) and the circuit breaker's state
//! machine (`circuit`).

pub mod circuit;
pub mod retry;
