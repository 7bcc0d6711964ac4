//! plan-exec benchmarks; the harness follows in a later commit.

fn main() {}
