//! The README's schedule example is `examples/schedule.rs` (which cargo compiles), from its
//! `use` line on, so the README's code cannot stop compiling unnoticed.

#[test]
fn the_readme_shows_the_compiled_schedule_example() {
    let root = env!("CARGO_MANIFEST_DIR");
    let example = std::fs::read_to_string(format!("{root}/examples/schedule.rs")).unwrap();
    let readme = std::fs::read_to_string(format!("{root}/../../README.md")).unwrap();
    let from = example
        .find("use omniprof::")
        .expect("the example's use line");
    let shown = format!("```rust\n{}```", &example[from..]);
    assert!(
        readme.contains(&shown),
        "README.md's schedule example differs from examples/schedule.rs: copy it over"
    );
}
