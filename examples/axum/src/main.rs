//! Example app.

fn main() {}
