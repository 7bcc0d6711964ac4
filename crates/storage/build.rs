//! Tells cargo to rebuild when a migration file is added or changed:
//! `refinery::embed_migrations!` reads the folder at compile time and cargo
//! would not notice a new file on its own.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
